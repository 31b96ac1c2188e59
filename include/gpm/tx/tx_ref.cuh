// gpm::tx_ref: the trivially copyable device view of a transactional heap (tx_heap.cuh), which
// kernels take by value, and gpm::transaction, what a transaction's body works with. A
// transaction reads and writes 32-bit words of the heap (and values of whole words on top);
// run() executes the body, commits it atomically and in isolation, and retries it when a
// conflicting transaction aborted it (the Helper Warps paper's STM, TPDS'20 §4: ownership records
// taken at encounter time, lower thread id wins, redo records, docs/transactions.md; with
// tx_reads::versioned, reads take no ownership record and are checked at commit).
//
//   heap.launch(blocks, 256, [=] __device__(gpm::tx_ref tx) {
//     for (std::uint64_t i : tx.workers(n)) {
//       const gpm::tx_result r = tx.run([&](auto& t) {   // per thread: gpm::single_thread
//         const std::uint32_t a = t.read(from[i]);
//         t.write(from[i], a - amount[i]);
//         t.write(to[i], t.read(to[i]) + amount[i]);
//       });
//       if (r.status != gpm::tx_status::committed) ...;
//     }
//   });
//
// With a cooperative-group tile of G > 1 threads, every lane of the tile calls run() together,
// each with its own transaction (a lane without work passes a body that does nothing); the tile
// shares the commit bookkeeping (one sequence-number reservation for the tile). The body runs
// once per attempt, so it must have no effects other than through `t`; after a failed access
// (t.ok() false) reads return 0 and writes are ignored until run() retries or reports.
// The read set (MaxLocks ownership records, taken or, with versioned reads, noted) and write set
// (MaxWrites words) live in the thread's registers and local memory; a transaction that exceeds
// them gets read_set_full or write_set_full, never a partial commit.
#pragma once

#include <cstdint>
#include <type_traits>

#include <gpm/tx/detail/engine.cuh>
#include <gpm/tx/tx_status.cuh>

namespace gpm {

// The transaction a body receives (`auto& t` in the body):
//   t.read(word) -> std::uint32_t, t.write(word, value)
//   t.read_as<T>(word), t.write_as<T>(word, value): T of sizeof(T) / 4 whole words (64-bit
//     integers, doubles, small structs), all its words locked together before any is read
//     (versioned reads: all checked together after all are read)
//   t.cancel(): end without writing (run() returns tx_status::cancelled)
//   t.ok(): false once this attempt cannot commit; t.words(): the heap's size in words
// A body is compiled for both read modes (Versioned: the heap's tx_options::reads is versioned);
// run() picks the heap's.
template <unsigned MaxLocks, unsigned MaxWrites, bool Versioned = false>
using transaction = detail::tx::transaction<MaxLocks, MaxWrites, Versioned>;

class tx_ref {
 public:
  tx_ref() = default;
  GPM_HOST_DEVICE explicit tx_ref(const detail::tx::heap_view& v) : v_(v) {}

  // Runs `body(t)` as one transaction of the calling lane, retrying aborted attempts (at most
  // tx_options::max_attempts times when that is not 0), and returns how it ended. Every lane of
  // `tile` must call it. In a kernel launched by tx_heap::launch with helper warps (helpers mode,
  // adaptive mode while ON), a commit hands its record to the block's ring and returns (durable
  // later, see tx_heap::durable_seq()); otherwise it persists its record itself before returning
  // (direct and hcl modes, adaptive while OFF), writes the home image in place under an undo
  // record (undo mode), or logs nothing (volatile mode).
  template <unsigned MaxLocks = 32, unsigned MaxWrites = 16, class Tile, class Body>
  __device__ tx_result run(const Tile& tile, Body&& body) const {
    return detail::tx::run<MaxLocks, MaxWrites>(v_, tile, body);
  }
  // The per-thread path (a tile of one thread).
  template <unsigned MaxLocks = 32, unsigned MaxWrites = 16, class Body>
  __device__ tx_result run(Body&& body) const {
    return detail::tx::run<MaxLocks, MaxWrites>(v_, single_thread{}, body);
  }

  GPM_HOST_DEVICE std::uint64_t words() const { return v_.words; }
  GPM_HOST_DEVICE tx_mode mode() const { return v_.mode; }

  // Where the calling thread stands among the threads that run transactions: in a kernel
  // launched by tx_heap::launch, the worker threads (helper warps excluded); otherwise the grid.
  __device__ std::uint64_t worker_index() const { return detail::tx::thread_slot(v_); }
  __device__ std::uint64_t worker_count() const {
    return v_.workers_per_block == 0 ? tile_count<1>()
                                     : std::uint64_t{gridDim.x} * v_.workers_per_block;
  }
  // The indices [0, n) the calling worker visits in a worker-stride loop.
  __device__ grid_range workers(std::uint64_t n) const {
    return grid_range(worker_index(), n, worker_count());
  }

 private:
  detail::tx::heap_view v_{};
};
static_assert(std::is_trivially_copyable_v<tx_ref>);

}  // namespace gpm
