// The host side of gpm-ndp's log-ahead (ndp_log_ahead.hpp).
#include "workloads/common/ndp_log_ahead.hpp"

#include <atomic>
#include <string>

#include "gpmbench/resources.hpp"

namespace gpmbench {

ndp_log_ahead::ndp_log_ahead(gpm::pool& p, std::string_view name, std::uint64_t capacity,
                             std::uint32_t max_bytes)
    : undo_(flat_undo::create(p, name, 1, capacity, max_bytes)), ndp_(team_), used_(1) {}

std::uint64_t ndp_log_ahead::publish(cudaStream_t s) {
  unsigned long long n = 0;
  gpm::check_cuda(cudaMemcpyAsync(&n, used_.data(), sizeof n, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync");
  gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after the log-ahead kernel");
  if (n > undo_.capacity()) {
    check_failed("gpm-ndp: the batch logged " + std::to_string(n) +
                 " entries ahead, more than the " + std::to_string(undo_.capacity()) +
                 " its log holds");
  }
  ndp_.persist(undo_.host_entry(0, 0), n * undo_.entry_bytes());
  undo_.publish(0, n);
  return n;
}

std::uint64_t ndp_log_ahead::write_back_and_commit(std::uint64_t count) {
  std::atomic<std::uint64_t> bytes{0};
  team_.parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    bytes += undo_.write_back_targets(0, begin, end);
  });
  undo_.commit();
  return bytes;
}

}  // namespace gpmbench
