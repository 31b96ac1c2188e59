// The gpKVS `cpu` mode: the same table, operations and undo guarantee as the GPU kernels, done by
// a team of CPU threads writing the pool through host pointers. Each thread logs into its own
// region of a flat_undo (entry written back, then counted) before changing a slot, and writes the
// slot back after; a per-bucket lock and a per-slot epoch play the roles they play on the GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "gpmbench/baselines.hpp"
#include "workloads/kvs/kvs_kernels.cuh"
#include "workloads/kvs/kvs_table.cuh"
#include "workloads/common/undo_logs.cuh"

namespace gpmbench::kvs {

class cpu_store {
 public:
  // `t` must be the host view of a table in the pool that `undo` (team.size() regions) covers.
  cpu_store(const table_view& t, cpu_team& team);

  // One batch, failure-atomic through `undo` (begin, operations, commit). Returns what it did;
  // bytes written back (log entries, counts, slots) are added to `bytes_persisted`.
  batch_counters run_batch(flat_undo& undo, const op_stream& ops, std::uint64_t batch,
                           std::uint64_t count, std::uint64_t& bytes_persisted);
  // Stores every key of [1, universe] with its batch-0 value and writes the table back.
  batch_counters preload(std::uint64_t universe);

 private:
  // One SET; logs through `undo` region `region` when undo is non-null.
  void set(flat_undo* undo, std::uint32_t region, std::uint64_t key, std::uint64_t value,
           batch_counters& c, std::uint64_t& bytes);

  table_view t_;
  cpu_team& team_;
  std::vector<std::uint32_t> locks_;
  std::vector<std::uint32_t> logged_epoch_;
  std::uint32_t epoch_ = 0;
};

}  // namespace gpmbench::kvs
