// The gpKVS batch kernels: a group of kWays threads per operation (lane = way), a lock per bucket
// in GPU memory, and an undo policy (undo_logs.cuh) as template argument, so that the gpm,
// gpm-conv, gpm-ndp and CAP modes run the same SET/GET code and differ only in how a batch is
// made durable. Within one batch a slot is logged once, by the first SET that changes it (a
// per-slot epoch in GPU memory says which), so every undo entry holds the slot's value from
// before the batch and the entries can be rolled back in any order.
#pragma once

#include <cstdint>
#include <string>

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/error.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/runtime.hpp>

#include "workloads/common/block_scan.cuh"
#include "workloads/common/undo_logs.cuh"
#include "workloads/kvs/kvs_table.cuh"

namespace gpmbench::kvs {

// Counters the kernels add to (GPU memory).
struct batch_counters {
  unsigned long long log_failures;  // an undo entry could not be written (log full)
  unsigned long long evictions;     // a SET into a full bucket replaced another key
  unsigned long long get_misses;    // a GET found no value (its key was never set, or evicted)
  unsigned long long bad_gets;      // a GET found a value that its key was never given
  unsigned long long sets;          // SETs done
  unsigned long long logged;        // undo entries written in the kernel
};

// Volatile per-batch state in GPU memory: bucket locks, the epoch of each slot's last undo, and
// the order in which the batch's operations run (order_by_region).
struct scratch_view {
  std::uint32_t* locks;
  std::uint32_t* logged_epoch;
  batch_counters* counters;
  const std::uint32_t* order;  // operation indices grouped by table region
};

// Operations are run grouped by the region of the table their key's home bucket lies in
// (kRegions regions of consecutive buckets), not in the order they come in: the grid then
// works through the table from one end to the other, each grid-stride step in a narrow span of
// it. Random accesses to host memory run several times faster within a narrow span than over a
// whole table (the `random_span` workload: 385 M persisted stores/s over 256 MiB, 105 M/s over
// 1 GiB on an H200), and every gpKVS operation reads a bucket and a SET writes a slot. The order
// within a region is arbitrary, as the order of a batch's operations on different groups
// always was: a batch's SETs of one key store one value.
inline constexpr std::uint64_t kRegions = 1u << 16;
inline constexpr unsigned kScanThreads = 256;

GPM_HOST_DEVICE inline std::uint64_t region_of(const table_view& t, std::uint64_t key) {
  return t.home(key) * kRegions / t.count;
}

// Counts the batch's operations per region.
__global__ inline void count_regions(table_view t, op_stream ops, std::uint64_t batch,
                                     std::uint64_t count, std::uint32_t* counts) {
  for (std::uint64_t i : gpm::grid_stride(count)) {
    atomicAdd(&counts[region_of(t, ops.key(batch, i))], 1u);
  }
}

// One block of kScanThreads: counts[r] becomes the operations of regions before r.
__global__ inline void offsets_of_regions(std::uint32_t* counts) {
  block_exclusive_scan<kScanThreads>(
      kRegions, [&](std::uint64_t r) { return counts[r]; },
      [&](std::uint64_t r, std::uint32_t offset) { counts[r] = offset; });
}

// Places each operation's index at the next free position of its region.
__global__ inline void place_in_regions(table_view t, op_stream ops, std::uint64_t batch,
                                        std::uint64_t count, std::uint32_t* cursors,
                                        std::uint32_t* order) {
  for (std::uint64_t i : gpm::grid_stride(count)) {
    order[atomicAdd(&cursors[region_of(t, ops.key(batch, i))], 1u)] = static_cast<std::uint32_t>(i);
  }
}

class batch_scratch {
 public:
  explicit batch_scratch(std::uint64_t buckets)
      : locks_(buckets), logged_(buckets * kWays), counters_(1), regions_(kRegions) {
    gpm::check_cuda(cudaMemset(locks_.data(), 0, locks_.bytes()), "cudaMemset");
    gpm::check_cuda(cudaMemset(logged_.data(), 0, logged_.bytes()), "cudaMemset");
    reset_counters();
  }
  scratch_view view() const {
    return {locks_.data(), logged_.data(), counters_.data(), order_.data()};
  }
  // Orders operations [0, count) of `batch` by table region for the next run_batch (see
  // kRegions), with kernels of `blocks` x `threads` on `s`.
  void order_by_region(unsigned blocks, unsigned threads, cudaStream_t s, const table_view& t,
                       const op_stream& ops, std::uint64_t batch, std::uint64_t count) {
    if (count > 0xffffffffull) {
      throw gpm::error(gpm::errc::invalid_argument,
                       "gpKVS: a batch of " + std::to_string(count) +
                           " operations; at most 2^32 - 1 are indexed");
    }
    if (order_.size() < count) order_ = gpm::device_buffer<std::uint32_t>(count);
    gpm::check_cuda(cudaMemsetAsync(regions_.data(), 0, regions_.bytes(), s), "cudaMemsetAsync");
    gpm::launch(count_regions, blocks, threads, 0, s, t, ops, batch, count, regions_.data());
    gpm::launch(offsets_of_regions, 1, kScanThreads, 0, s, regions_.data());
    gpm::launch(place_in_regions, blocks, threads, 0, s, t, ops, batch, count, regions_.data(),
                order_.data());
  }
  // The epoch of the next batch: slots whose logged_epoch differs have not been logged in it.
  std::uint32_t next_epoch() { return ++epoch_; }
  void reset_counters() {
    gpm::check_cuda(cudaMemset(counters_.data(), 0, counters_.bytes()), "cudaMemset");
  }
  batch_counters counters() const {
    batch_counters c{};
    gpm::check_cuda(cudaMemcpy(&c, counters_.data(), sizeof c, cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
    return c;
  }

 private:
  gpm::device_buffer<std::uint32_t> locks_;
  gpm::device_buffer<std::uint32_t> logged_;
  gpm::device_buffer<batch_counters> counters_;
  gpm::device_buffer<std::uint32_t> regions_;  // per region: operations, then cursors
  gpm::device_buffer<std::uint32_t> order_;
  std::uint32_t epoch_ = 0;
};

namespace detail {

__device__ inline void lock_bucket(std::uint32_t* lock) {
  gpm::atomic_ref<std::uint32_t, gpm::thread_scope::device> l(*lock);
  std::uint32_t expected = 0;
  while (!l.compare_exchange_weak(expected, 1, gpm::memory_order_acquire)) {
    expected = 0;
    __nanosleep(64);  // lets other warps (and the emulator's fibers) run
  }
}
__device__ inline void unlock_bucket(std::uint32_t* lock) {
  gpm::atomic_ref<std::uint32_t, gpm::thread_scope::device> l(*lock);
  l.store(0, gpm::memory_order_release);
}

// Slots are read by GETs while SETs change them: 8-byte atomic accesses at gpm::pool_scope (only
// GPU threads touch the table while a batch runs), so that Zipf-hot buckets are served by the L2.
__device__ inline std::uint64_t load_word(const std::uint64_t& w, gpm::memory_order o) {
  return gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(const_cast<std::uint64_t&>(w)).load(o);
}
__device__ inline void store_word(std::uint64_t& w, std::uint64_t v, gpm::memory_order o) {
  gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(w).store(v, o);
}

}  // namespace detail

// What one thread did in a kernel; added to batch_counters once, at the end of the kernel.
struct thread_tally {
  unsigned long long log_failures = 0, evictions = 0, get_misses = 0, bad_gets = 0, sets = 0,
                     logged = 0;
  __device__ void add_to(batch_counters* c) const {
    if (log_failures) atomicAdd(&c->log_failures, log_failures);
    if (evictions) atomicAdd(&c->evictions, evictions);
    if (get_misses) atomicAdd(&c->get_misses, get_misses);
    if (bad_gets) atomicAdd(&c->bad_gets, bad_gets);
    if (sets) atomicAdd(&c->sets, sets);
    if (logged) atomicAdd(&c->logged, logged);
  }
};

// SET by a tile of kWays threads: update the key's way, else fill an empty way, else evict the
// way the key's hash names (choose_way). The changed slot is logged first (once per batch) and,
// with a persistent policy, persisted before the bucket is unlocked.
// The group's entries go to its lanes in turn (`entries`, the group's count in this kernel, picks
// the lane), not to the lane of the changed way: an HCL row is one chunk of each lane of a warp,
// and with the lane of the way logging (one lane in 8, at random), the warp's rows were 1/8 used,
// so that its appends reached the host as 8 times the transactions and recovery copied 8 times
// the bytes. Lanes of the warp's groups that log in step now fill rows together.
template <class Undo, class Tile>
__device__ void set_key(const Tile& tile, const table_view& t, const scratch_view& s,
                        const Undo& undo, std::uint32_t epoch, std::uint64_t key,
                        std::uint64_t value, std::uint32_t& entries, thread_tally& tally) {
  const unsigned lane = tile.thread_rank();
  const std::uint64_t b = t.home(key);
  if (lane == 0) detail::lock_bucket(&s.locks[b]);
  tile.sync();
  slot& mine = t.buckets[b].ways[lane];
  const std::uint64_t k = detail::load_word(mine.key, gpm::memory_order_relaxed);
  const unsigned found = tile.ballot(k == key);
  const unsigned empty = tile.ballot(k == kEmptyKey);
  const unsigned way = choose_way(found, empty, key);  // the same in every lane
  std::uint32_t& logged = s.logged_epoch[b * kWays + way];
  bool ok = true;
  if (logged != epoch) {  // every lane reads the word; only `way` writes it, after this
    const unsigned logger = entries++ % kWays;
    if (lane == logger) ok = undo.save(&t.buckets[b].ways[way], sizeof(slot));
    // The entry is durable (save persists it) before the way's lane, after this, changes the slot.
    ok = tile.shfl(static_cast<int>(ok), static_cast<int>(logger)) != 0;
    if (ok && lane == way) {
      logged = epoch;
      tally.logged += Undo::persistent;
    }
  }
  if (lane == way) {
    if (!ok) {
      ++tally.log_failures;
    } else {
      ++tally.sets;
      tally.evictions += found == 0 && empty == 0;
      // The slot protocol GETs rely on (get_key): an evicted key is withdrawn before the value
      // changes, the value is written before the new key appears. A GET that reads the same key
      // before and after the value has that key's value.
      if (!found && k != kEmptyKey) {
        detail::store_word(mine.key, kEmptyKey, gpm::memory_order_relaxed);
      }
      detail::store_word(mine.value, value, gpm::memory_order_release);
      if (!found) detail::store_word(mine.key, key, gpm::memory_order_release);
      if constexpr (Undo::persistent) {
        gpm::persist(&mine, sizeof(slot));
      } else {
        __threadfence();  // the next holder of the lock sees the slot
      }
    }
  }
  tile.sync();
  if (lane == 0) detail::unlock_bucket(&s.locks[b]);
}

// GET by a tile: lock-free; returns whether the key was found and its value in `value`.
template <class Tile>
__device__ bool get_key(const Tile& tile, const table_view& t, std::uint64_t key,
                        std::uint64_t& value) {
  const slot& mine = t.buckets[t.home(key)].ways[tile.thread_rank()];
  std::uint64_t k = 0, v = 0;
  for (;;) {  // re-read a way whose key changed around its value (set_key's slot protocol)
    k = detail::load_word(mine.key, gpm::memory_order_acquire);
    v = detail::load_word(mine.value, gpm::memory_order_acquire);
    if (tile.ballot(detail::load_word(mine.key, gpm::memory_order_relaxed) != k) == 0) break;
  }
  const unsigned found = tile.ballot(k == key);
  if (found == 0) return false;
  value = tile.shfl(v, static_cast<int>(choose_way(found, 0, key)));
  return true;
}

// One batch: ops.count operations of batch `batch`, a tile per operation (grid-stride over
// s.order, which batch_scratch::order_by_region filled). GETs check what they read against the
// value encoding (value_belongs_to, a batch not after this one) and count failures; they are not
// written anywhere.
template <class Undo>
__global__ void run_batch(table_view t, scratch_view s, Undo undo, op_stream ops,
                          std::uint64_t batch, std::uint64_t count, std::uint32_t epoch) {
  const auto tile = gpm::make_tile<kWays>();
  thread_tally tally;
  std::uint32_t entries = 0;
  for (std::uint64_t n : gpm::grid_stride<kWays>(count)) {
    const std::uint64_t i = s.order[n];
    const std::uint64_t key = ops.key(batch, i);
    if (ops.is_set(batch, i)) {
      set_key(tile, t, s, undo, epoch, key, value_of(key, batch), entries, tally);
      continue;
    }
    std::uint64_t v = 0;
    const bool hit = get_key(tile, t, key, v);
    if (tile.thread_rank() == 0) {
      tally.get_misses += !hit;
      tally.bad_gets += hit && !get_is_valid(v, key, batch);
    }
  }
  tally.add_to(s.counters);
}

// Stores every key of [1, universe] with its batch-0 value, without logging or persisting (the
// caller makes the table durable after the kernel).
__global__ inline void preload(table_view t, scratch_view s, std::uint64_t universe,
                               std::uint32_t epoch) {
  const auto tile = gpm::make_tile<kWays>();
  thread_tally tally;
  std::uint32_t entries = 0;
  for (std::uint64_t i : gpm::grid_stride<kWays>(universe)) {
    set_key(tile, t, s, no_undo{}, epoch, i + 1, value_of(i + 1, 0), entries, tally);
  }
  tally.add_to(s.counters);
}

// gpm-ndp's log ahead of the batch: for each SET, the next entry of flat_undo region 0 (counted
// in `used`) gets the pool offset and old bytes of the SET's home bucket, stored without
// persisting; the CPU writes the entries back before the batch kernel runs. A tile copies a
// bucket, 16 bytes a lane.
__global__ inline void log_home_buckets(table_view t, gpm::pool_ref pool, unsigned char* entries,
                                        std::uint64_t entry_bytes, op_stream ops,
                                        std::uint64_t batch, std::uint64_t count,
                                        unsigned long long* used) {
  const auto tile = gpm::make_tile<kWays>();
  const unsigned lane = tile.thread_rank();
  for (std::uint64_t i : gpm::grid_stride<kWays>(count)) {
    if (!ops.is_set(batch, i)) continue;
    unsigned long long at = 0;
    if (lane == 0) at = atomicAdd(used, 1ull);
    at = tile.shfl(at, 0);
    auto* head = reinterpret_cast<flat_undo::entry_head*>(entries + at * entry_bytes);
    const bucket& b = t.buckets[t.home(ops.key(batch, i))];
    if (lane == 0) *head = {pool.offset_of(&b), sizeof(bucket)};
    reinterpret_cast<slot*>(head + 1)[lane] = b.ways[lane];
  }
}

}  // namespace gpmbench::kvs
