// What the gpKVS tests share: a small table in a pool, the geometry the GPU kernels run with, and
// running one batch with a given undo policy, so that the unit tests and the crash tests drive the
// workload's own kernels (bench/workloads/kvs) the same way.
#pragma once

#include <cstdint>
#include <string>

#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include "workloads/kvs/kvs_kernels.cuh"
#include "workloads/kvs/kvs_table.cuh"

namespace gpm::test::kvs {

using namespace gpmbench::kvs;

inline constexpr char kLayout[] = "kvs-test";
inline constexpr unsigned kBlocks = 4;
inline constexpr unsigned kThreads = 64;  // 8 groups of 8 per block
inline constexpr std::uint64_t kGroups = kBlocks * kThreads / kWays;

inline gpm::pool_options options_in(const std::string& pm_dir, const std::string& snapshot_dir) {
  gpm::pool_options o;
  o.pm_dir = pm_dir;
  o.snapshot_dir = snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

// Undo entries a thread may write in one batch of `ops` operations: all of its group's.
inline std::uint64_t hcl_bytes_per_thread(std::uint64_t ops) {
  return (ops + kGroups - 1) / kGroups * gpm::undo_tx::entry_footprint(sizeof(slot));
}

template <class Undo>
void launch_batch(const table_view& t, batch_scratch& s, const Undo& undo, const op_stream& ops,
                  std::uint64_t batch, std::uint64_t count) {
  s.order_by_region(kBlocks, kThreads, nullptr, t, ops, batch, count);
  gpm::launch(run_batch<Undo>, kBlocks, kThreads, 0, nullptr, t, s.view(), undo, ops, batch, count,
              s.next_epoch());
  gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a gpKVS batch");
}

// A universe of keys none of whose home buckets overflows in a table of `buckets` buckets, so
// that no SET evicts and the table must equal the reference exactly. Returns false otherwise.
inline bool fits_without_eviction(std::uint64_t universe, std::uint64_t buckets) {
  std::vector<unsigned> load(buckets, 0);
  const table_view t{nullptr, buckets};
  for (std::uint64_t k = 1; k <= universe; ++k) {
    if (++load[t.home(k)] > kWays) return false;
  }
  return true;
}

}  // namespace gpm::test::kvs
