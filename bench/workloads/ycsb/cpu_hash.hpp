// CPU-assisted data management, the GPHash paper's CPU baseline (FAST'25 §4.1): the GPU ships
// each batch of operations to the host (cudaMemcpy), CPU threads of a cpu_team run them on a
// persistent hash in the host-mapped pool, writing cache lines back with gpm::write_back, and
// the statuses are shipped back to the GPU. The hash is Clevel's table (clevel_index.cuh), run by
// CPU threads: the same lock-free, log-free protocol and the same crash guarantee, so the two
// modes differ in who runs the operations and how stores become durable, not in what is durable.
//
// hostNativeAtomicSupported is 0 on the lent machines (platform.md), so GPU and CPU must never
// run operations on one table at the same time; this class only ever runs them on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <gpm/platform/runtime.hpp>

#include "gpmbench/baselines.hpp"
#include "gpmbench/resources.hpp"
#include "workloads/ycsb/clevel_index.cuh"

namespace gpmbench::ycsb {

template <class Key, class Value = kv_value>
class cpu_hash_index {
 public:
  using key_type = Key;
  using value_type = Value;

  // A table for `keys` keys and `records` record writes, run by `threads` CPU threads, shipping
  // batches of at most `max_batch` operations.
  static std::unique_ptr<cpu_hash_index> create(
      gpm::pool& p, const std::string& name, std::uint64_t keys, std::uint64_t records,
      std::uint64_t max_batch, unsigned threads = std::thread::hardware_concurrency()) {
    return std::unique_ptr<cpu_hash_index>(new cpu_hash_index(
        clevel_index<Key, Value>::create(p, name, keys, records, geometry{1, 32}), max_batch,
        threads));
  }
  // Opens (validates) a table made by create(); the lock-free table has nothing to recover.
  static std::unique_ptr<cpu_hash_index> open(
      gpm::pool& p, const std::string& name, std::uint64_t max_batch,
      unsigned threads = std::thread::hardware_concurrency()) {
    return std::unique_ptr<cpu_hash_index>(new cpu_hash_index(
        clevel_index<Key, Value>::open(p, name, geometry{1, 32}), max_batch, threads));
  }
  static std::uint64_t pool_bytes(std::uint64_t keys, std::uint64_t records) {
    return clevel_index<Key, Value>::pool_bytes(keys, records);
  }

  void clear() { table_.clear(); }

  // GPU -> CPU: the operations; CPU threads run them; CPU -> GPU: the statuses. Returns when
  // the statuses are in `status` (device memory) and every operation is durable.
  // `versions` (device memory, may be null) gets the version each find or read-modify-write read.
  void execute(const kv_op* ops, op_status* status, std::uint64_t n, cudaStream_t s,
               std::uint64_t* versions = nullptr) {
    gpm::require(n <= max_batch_, "cpu_hash_index: a batch larger than the staging buffers");
    if (n == 0) return;
    auto* host_ops = reinterpret_cast<kv_op*>(ops_.data());
    auto* host_status = reinterpret_cast<op_status*>(status_.data());
    auto* host_versions = reinterpret_cast<std::uint64_t*>(versions_.data());
    gpm::check_cuda(cudaMemcpyAsync(host_ops, ops, n * sizeof(kv_op), cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (operations to the host)");
    gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const clevel_ref<Key, Value> ref = table_.host_ref();
    team_->parallel_for(n, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) {
        host_versions[i] = 0;
        host_status[i] = ref.template execute<cpu_write_back>(host_ops[i], &host_versions[i]);
      }
    });
    gpm::check_cuda(
        cudaMemcpyAsync(status, host_status, n * sizeof(op_status), cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync (statuses to the GPU)");
    if (versions != nullptr) {
      gpm::check_cuda(cudaMemcpyAsync(versions, host_versions, n * sizeof(std::uint64_t),
                                      cudaMemcpyHostToDevice, s),
                      "cudaMemcpyAsync (versions to the GPU)");
    }
  }

  const clevel_index<Key, Value>& table() const { return table_; }
  std::uint64_t slot_capacity() const { return table_.slot_capacity(); }

 private:
  cpu_hash_index(clevel_index<Key, Value> table, std::uint64_t max_batch, unsigned threads)
      : table_(std::move(table)),
        max_batch_(max_batch),
        team_(std::make_unique<cpu_team>(threads)),
        ops_(max_batch * sizeof(kv_op)),
        status_(max_batch * sizeof(op_status)),
        versions_(max_batch * sizeof(std::uint64_t)) {}

  clevel_index<Key, Value> table_;
  std::uint64_t max_batch_;
  std::unique_ptr<cpu_team> team_;
  pinned_buffer ops_;
  pinned_buffer status_;
  pinned_buffer versions_;
};

}  // namespace gpmbench::ycsb
