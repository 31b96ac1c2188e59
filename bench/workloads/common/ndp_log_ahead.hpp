// gpm-ndp's way of making a batch failure-atomic, shared by gpKVS and gpDB (GPM, ASPLOS'22 §6,
// the GPM-NDP baseline): before the batch, a GPU kernel logs ahead the old bytes of everything the
// batch may change into region 0 of a flat_undo, without persisting; CPU threads write the entries
// back and publish them; the batch kernel then runs without logging or persisting; CPU threads
// write back the bytes the entries name, and the batch commits. A crash before the commit leaves
// an active flat_undo that recover() rolls back.
#pragma once

#include <cstdint>
#include <string_view>

#include <gpm/platform/runtime.hpp>
#include <gpm/pool/pool.hpp>

#include "gpmbench/baselines.hpp"
#include "workloads/common/undo_logs.cuh"

namespace gpmbench {

class ndp_log_ahead {
 public:
  // The flat_undo `name` in `p`: one region of `capacity` entries of up to `max_bytes` old bytes.
  ndp_log_ahead(gpm::pool& p, std::string_view name, std::uint64_t capacity,
                std::uint32_t max_bytes);

  // Begins a batch and logs ahead: log(entries, entry_bytes, used) launches the caller's kernel on
  // `s`, which fills entries (device addresses, entry_bytes apart) and counts them in *used; the
  // entries are then written back and published. Returns how many there are; fails the mode
  // (check_failed) if they are more than the capacity.
  template <class LaunchLog>
  std::uint64_t log(cudaStream_t s, LaunchLog launch_log) {
    undo_.begin();
    gpm::check_cuda(cudaMemsetAsync(used_.data(), 0, used_.bytes(), s), "cudaMemsetAsync");
    launch_log(undo_.device_entry(0, 0), undo_.entry_bytes(), used_.data());
    return publish(s);
  }
  // After the batch kernel: writes back, on CPU threads, the bytes that the `count` entries name,
  // then commits. Returns the bytes written back.
  std::uint64_t write_back_and_commit(std::uint64_t count);

  // The CPU threads' write-back of anything else the mode stores without persisting.
  ndp_persister& persister() { return ndp_; }
  std::uint64_t bytes_persisted() const { return ndp_.bytes_persisted(); }

 private:
  std::uint64_t publish(cudaStream_t s);

  flat_undo undo_;
  cpu_team team_;
  ndp_persister ndp_;
  gpm::device_buffer<unsigned long long> used_;
};

}  // namespace gpmbench
