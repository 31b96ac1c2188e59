// The one transaction engine of gpm::tx: the device view of a heap, the metadata-based STM of the
// Helper Warps paper (TPDS'20, §4, Fig. 2) with redo logging at 32-bit-word granularity, the
// commit paths (volatile; direct; striped, the HCL layout; undo logging in place, GPM-style;
// ring + helper warps, §4.1), the
// adaptive switch between direct and ring commits (§5: per-block byte counters, a global
// bandwidth monitor per time slice, one deciding thread) and the helper warps' drain loop.
// Public entry points are gpm::tx_ref (tx_ref.cuh) and gpm::tx_heap::launch (tx_heap.cuh).
//
// Concurrency control. Every word maps to an ownership record (orec, word modulo the orec count,
// so a warp's accesses to consecutive words touch consecutive orecs). An orec is one 64-bit word,
// (owner slot + 1) << 32 | owner attempt, 0 when free, so lock and transaction id change in one
// CAS. Reads and writes take the orec at encounter time. On a conflict, the lower thread slot
// wins: it first CASes the owner's status word ACTIVE -> ABORTED (the signal the owner checks at
// commit) and then the orec; the higher slot aborts itself. A transaction commits by CASing its
// own status ACTIVE -> COMMITTING; from then on nobody may abort it, and a stealer that finds its
// owner COMMITTING aborts itself instead. That closes the paper's window between the owner's
// check and its write-back. Locks are released by CAS, so a stolen orec is never freed by its
// former owner.
//
// Commit order. A committer takes its global sequence number after COMMITTING, while it still
// holds all its orecs, so conflicting transactions are numbered in conflict order and replaying
// records in sequence order reproduces the heap. The counter's atomic is relaxed: the orecs'
// release and acquire (and the combining list's) already order two conflicting committers'
// atomics, and a sequentially consistent one costs a GPU-wide fence on every commit. The number and
// the record's space in its log stream are taken together under one order lock per log (direct,
// striped) or per block (in kernels launched with a ring, for ring and direct commits alike), so
// within a log records lie in sequence order; this is what lets the host free log space in order
// without ever waiting on a record that cannot be written. The lock covers only handing out the
// positions: a committer releases its orecs right after (its number already orders it before any
// conflicting commit that follows), and only then waits for log or ring space and writes its
// record.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/tx/detail/format.hpp>
#include <gpm/tx/tx_status.cuh>

namespace gpm::detail::tx {

// ---- views ----------------------------------------------------------------------------------

// Per log, in GPU memory: the order lock of direct commits, the next stream position to hand
// out, the log's head as last read from the pool (a lower bound of the real one), and the chunks
// persisted into the log since the heap was opened (statistics and the adaptive per-launch
// choice; kept here, not in the pool, because a system-scope atomic on one host word per commit
// costs a PCIe round trip that every commit of the log would wait on in turn).
struct log_state {
  std::uint32_t lock;
  std::uint32_t reserved0;
  std::uint64_t next;
  std::uint64_t head_seen;
  std::uint64_t persisted;
};

// A block's persistence ring (helpers and adaptive launches) at the start of its dynamic shared
// memory, followed by a reservation request per worker thread (reserve_combined), ring_chunks
// 16-byte chunks, ring_chunks 32-bit fill flags and ring_chunks 32-bit log indices. Ring positions
// count chunks that went through the ring this launch; a chunk at ring position p lives at index p
// % ring_chunks, its flag holds p + 1 (32 bits) once it is written, and its log index says where in
// the block's log it goes (direct commits of an adaptive launch take log positions but no ring
// positions, so the two differ).
struct ring_control {
  log_state stream;  // the block's log: lock, next position, head seen (its count: logs_state)
  std::uint32_t workers_done;  // workers of the block that returned from the body
  std::uint32_t pending;       // requests waiting for a combiner: a list, index + 1 of its first
  std::uint64_t reserved;      // next ring position to hand out
  std::uint64_t claimed;       // helpers: positions before it are being or have been copied
  std::uint64_t persisted;     // positions before it are persisted; their ring slots are free
  std::uint64_t bytes;         // adaptive: bytes the block persisted and has not reported yet
  // adaptive: the global time (ns) at which the time slice in which the block last reported ends
  std::uint64_t slice_end;
  // adaptive: the monitor's `on` as the block last saw it (at its start and at each report), so
  // that committers read a shared-memory word, not the monitor's in L2, on every commit
  std::uint32_t on;
  std::uint32_t reserved0;
  std::uint64_t reserved1;
};
static_assert(sizeof(ring_control) % kChunkBytes == 0);

// A worker's request for sequence numbers and log (and ring) positions, in the block's shared
// memory; the combiner that serves it overwrites the amounts with the first positions and then
// sets `seq`, which the worker waits for.
struct reservation_request {
  std::uint32_t count;        // sequence numbers asked for
  std::uint32_t next;         // the next request in the pending list, index + 1 (0: the last)
  std::uint64_t chunks;       // log chunks asked for; served: the first log position
  std::uint64_t ring_chunks;  // ring chunks asked for (0: not through the ring); served: first
  std::uint64_t seq;          // 0 until served, then the first sequence number
};
static_assert(sizeof(reservation_request) % kChunkBytes == 0);

GPM_HOST_DEVICE constexpr std::uint64_t ring_bytes(std::uint32_t ring_chunks,
                                                   std::uint32_t workers) {
  return sizeof(ring_control) + std::uint64_t{workers} * sizeof(reservation_request) +
         std::uint64_t{ring_chunks} * (kChunkBytes + 8);
}

// The adaptive switch's global bandwidth monitor (§5), in GPU memory. Blocks add the bytes they
// persisted in a slice when they see that slice end; the one thread that takes `lock` closes the
// slice and decides: helpers ON as soon as a slice persisted more than the threshold, OFF after
// kOffSlices slices at or below it. tx_heap::launch zeroes the first seven fields (and sets `on`
// as the launch starts) before each adaptive launch; the counters run since open.
struct bandwidth_monitor {
  std::uint64_t slice;        // the last slice decided (global time / slice length); 0: none yet
  std::uint64_t bytes;        // bytes reported since then
  std::uint32_t on;           // committers use the ring and helper warps
  std::uint32_t below;        // slices in a row at or below the threshold
  std::uint32_t lock;         // the deciding thread's
  std::uint32_t blocks_done;  // blocks of the launch that finished (finish_launch)
  std::uint64_t chunks;       // chunks the launch's finished blocks persisted
  std::uint64_t slices_on;    // slices decided ON, since open
  std::uint64_t slices_off;   // slices decided OFF
  std::uint64_t switches;     // times the decision changed
};
inline constexpr std::uint64_t kMonitorResetBytes = 40;  // slice ... chunks

// Adaptive mode's measurement of launch n, in mapped pinned memory, which the host reads when it
// plans the next launch (no copy or event in the stream): tx_heap::launch's start kernel writes
// the start, the launch's last block to finish the rest (finish_launch), `done` last.
struct launch_marks {
  std::uint64_t start_seq;  // the commit counter and the GPU's global time as the launch starts
  std::uint64_t start_ns;
  std::uint64_t stop_seq;  // ... and as its last block ends
  std::uint64_t stop_ns;
  std::uint64_t chunks;  // log chunks the launch persisted
  std::uint64_t done;    // n once the rest is written
};
inline constexpr std::uint32_t kOffSlices = 5;  // the paper's choice (§5.2)

// Per thread slot, in GPU memory: commits, aborts, commits whose record went through a ring.
inline constexpr std::uint32_t kCounters = 3;

// How full the rings were (the paper's Fig. 15): bin i holds the time, in ns, during which a
// block's ring held between i / kOccupancyBins and (i + 1) / kOccupancyBins of its chunks
// (positions handed out and not yet freed; the last bin also holds a full ring with committers
// waiting), summed over blocks, as the first helper warp of each block saw it.
inline constexpr std::uint32_t kOccupancyBins = 64;

struct heap_view {
  std::uint32_t* work = nullptr;  // the working copy in GPU memory: reads and writes go here
  std::uint64_t* orecs = nullptr;
  std::uint64_t orec_mask = 0;  // orec count - 1 (a power of two)
  // tx_reads::versioned: per orec, a version that a commit raises, before it applies its writes,
  // for every orec it wrote; reads then take no orec (transaction::read_versioned). Null: reads
  // take their orecs, as the paper's do.
  std::uint32_t* versions = nullptr;
  std::uint64_t* status = nullptr;    // per thread slot: attempt << 2 | state
  std::uint64_t* counters = nullptr;  // per thread slot: kCounters counters
  std::uint64_t max_threads = 0;
  std::uint64_t words = 0;
  std::uint64_t* seq = nullptr;  // the last sequence number handed out
  log_state* logs_state = nullptr;
  log_control* control = nullptr;  // the logs' control lines (pool, the GPU's mapping)
  ulonglong2* log_data = nullptr;  // log l's chunks start at l * log_chunks
  std::uint64_t log_chunks = 0;
  std::uint32_t logs = 0;
  tx_mode mode = tx_mode::direct;
  std::uint64_t salt = 0;
  std::uint64_t epoch = 0;
  std::uint32_t max_attempts = 0;  // 0: unbounded
  std::uint32_t* home = nullptr;   // undo: the home image, through the GPU's mapping of the pool
  std::uint64_t undo_depth = 0;    // undo: chunks of each thread's undo slot
  bandwidth_monitor* monitor = nullptr;  // adaptive mode
  std::uint64_t slice_ns = 1;            // adaptive: the monitor's time slice
  std::uint64_t slice_threshold = 0;     // adaptive: helpers ON above this many bytes in a slice
  std::uint64_t* occupancy = nullptr;    // kOccupancyBins bins of ring occupancy (ns)
  // Set by tx_heap::launch for the blocks it runs (0 / null in kernels the caller launched):
  std::uint32_t workers_per_block = 0;
  std::uint32_t ring_chunks = 0;
  ring_control* ring = nullptr;   // this block's ring in shared memory
  std::uint64_t log_key = 0;      // log_seed of this block's log (redo records' checksums)
  launch_marks* marks = nullptr;  // adaptive: where this launch's measurement goes
  std::uint64_t launch = 0;       // adaptive: the launch's number (launch_marks::done)
};
static_assert(std::is_trivially_copyable_v<heap_view>);

// The calling thread's status slot and its block's log.
__device__ inline std::uint64_t thread_slot(const heap_view& v) {
  if (v.workers_per_block == 0) return tile_index<1>();
  return std::uint64_t{blockIdx.x} * v.workers_per_block + threadIdx.x;
}
__device__ inline std::uint32_t log_of_block(const heap_view& v) { return blockIdx.x % v.logs; }

// (at + j) % n for at, j < n. A 64-bit remainder is a long subroutine on the GPU, and the commit
// and drain paths index their rings and logs chunk by chunk: they reduce a record's or a batch's
// first position once and step from it, never by a lap or more (a record, or what a ring holds).
GPM_HOST_DEVICE inline std::uint64_t ring_step(std::uint64_t at, std::uint64_t j, std::uint64_t n) {
  const std::uint64_t x = at + j;
  return x < n ? x : x - n;
}

// ---- status words and orecs -----------------------------------------------------------------

inline constexpr std::uint64_t kIdle = 0, kActive = 1, kCommitting = 2, kAborted = 3;

GPM_HOST_DEVICE constexpr std::uint64_t status_word(std::uint64_t attempt, std::uint64_t state) {
  return attempt << 2 | state;
}
GPM_HOST_DEVICE constexpr std::uint64_t state_of(std::uint64_t status) { return status & 3; }
GPM_HOST_DEVICE constexpr std::uint32_t attempt_tag(std::uint64_t attempt) {
  return static_cast<std::uint32_t>(attempt);
}
GPM_HOST_DEVICE constexpr std::uint64_t orec_word(std::uint64_t slot, std::uint64_t attempt) {
  return (slot + 1) << 32 | attempt_tag(attempt);
}

using dev64 = atomic_ref<std::uint64_t, thread_scope::device>;
using dev32 = atomic_ref<std::uint32_t, thread_scope::device>;
using blk64 = atomic_ref<std::uint64_t, thread_scope::block>;
using blk32 = atomic_ref<std::uint32_t, thread_scope::block>;

// Waits politely: lets other warps (and, on the emulator, other fibers) run.
__device__ inline void pause(std::uint32_t round) { __nanosleep(round < 6 ? 32u << round : 2048u); }

template <class Lock>
__device__ inline void lock_order(Lock lock) {
  for (std::uint32_t round = 0;; ++round) {
    std::uint32_t expected = 0;
    if (lock.compare_exchange_strong(expected, 1, memory_order_acquire)) return;
    pause(round);
  }
}

// The most chunks one reservation may take: what the block's log holds, and its ring too when
// the record goes through the ring.
GPM_HOST_DEVICE inline std::uint64_t record_room(const heap_view& v, bool via_ring) {
  if (v.mode == tx_mode::undo) return v.undo_depth;
  return via_ring && v.ring_chunks < v.log_chunks ? v.ring_chunks : v.log_chunks;
}

// Whether a commit now goes through the block's ring: always in a helpers launch; in an adaptive
// launch with a ring while the monitor said ON when the block last looked (at most a time slice
// ago); never without a ring.
__device__ inline bool use_ring(const heap_view& v) {
  return v.ring != nullptr &&
         (v.mode != tx_mode::adaptive || blk32(v.ring->on).load(memory_order_relaxed) != 0);
}

__device__ inline reservation_request* ring_requests(const heap_view& v) {
  return reinterpret_cast<reservation_request*>(v.ring + 1);
}
__device__ inline ulonglong2* ring_chunks(const heap_view& v) {
  return reinterpret_cast<ulonglong2*>(ring_requests(v) + v.workers_per_block);
}
__device__ inline std::uint32_t* ring_flags(const heap_view& v) {
  return reinterpret_cast<std::uint32_t*>(ring_chunks(v) + v.ring_chunks);
}
__device__ inline std::uint32_t* ring_log_index(const heap_view& v) {
  return ring_flags(v) + v.ring_chunks;
}

// ---- the adaptive switch (§5) ---------------------------------------------------------------

// Closes the slices since the last decision, which persisted `bytes`: ON at once when they
// exceeded the threshold (per slice), OFF after kOffSlices slices at or below it. Called by
// the one thread that holds the monitor's lock.
__device__ inline void decide(const heap_view& v, bandwidth_monitor& m, std::uint64_t slices,
                              std::uint64_t bytes) {
  const bool above = bytes / slices > v.slice_threshold;
  std::uint32_t on = dev32(m.on).load(memory_order_relaxed);
  if (above) {
    m.below = 0;
  } else {
    m.below =
        m.below + slices > kOffSlices ? kOffSlices : m.below + static_cast<std::uint32_t>(slices);
  }
  const std::uint32_t next = above ? 1 : m.below >= kOffSlices ? 0 : on;
  if (next != on) {
    dev32(m.on).store(next, memory_order_relaxed);
    ++m.switches;
    kernel_crash_point("tx.switch");
  }
  (next != 0 ? m.slices_on : m.slices_off) += slices;
}

// Adaptive launches with a ring: adds `bytes` the calling thread just persisted to its block's
// count (a shared-memory atomic; what a helper warp does after each batch).
__device__ inline void monitor_count(const heap_view& v, std::uint64_t bytes) {
  if (v.mode != tx_mode::adaptive || v.ring == nullptr) return;
  blk64(v.ring->bytes).fetch_add(bytes, memory_order_relaxed);
}

// When a time slice has passed since the block last reported: adds the block's count to the
// global monitor (one thread per block) and lets one thread of the device decide. Committers
// call it, helper warps never: a ring-bound launch waits for its helpers, and this report (global
// atomics, the monitor's lock, the decision) would hold a helper's warp between two batches,
// while committers wait for ring space anyway. (On an H200, adaptive ran 6% behind helpers on
// Hashtable H2 with the ring on throughout when helpers reported, 3% with this split.) The report
// also refreshes the block's copy of the monitor's `on` (ring_control::on).
__device__ inline void monitor_tick(const heap_view& v) {
  ring_control* ring = v.ring;
  if (v.mode != tx_mode::adaptive || ring == nullptr) return;
  // Most calls end at this comparison, with no division on the commit's path (a 64-bit division
  // is a long subroutine on a GPU).
  const std::uint64_t now_ns = global_time_ns();
  std::uint64_t end = blk64(ring->slice_end).load(memory_order_relaxed);
  if (now_ns < end) return;
  const std::uint64_t now = now_ns / v.slice_ns;
  if (!blk64(ring->slice_end)
           .compare_exchange_strong(end, (now + 1) * v.slice_ns, memory_order_relaxed)) {
    return;
  }
  bandwidth_monitor& m = *v.monitor;
  dev64(m.bytes).fetch_add(blk64(ring->bytes).exchange(0, memory_order_relaxed),
                           memory_order_relaxed);
  const auto look = [&] {
    blk32(ring->on).store(dev32(m.on).load(memory_order_relaxed), memory_order_relaxed);
  };
  std::uint32_t unlocked = 0;
  if (now <= dev64(m.slice).load(memory_order_relaxed) ||
      !dev32(m.lock).compare_exchange_strong(unlocked, 1, memory_order_acquire)) {
    return look();
  }
  const std::uint64_t last = dev64(m.slice).load(memory_order_relaxed);
  if (now > last) {
    dev64(m.slice).store(now, memory_order_relaxed);
    // The launch's first decision covers what the blocks persisted since it started.
    decide(v, m, last == 0 ? 1 : now - last, dev64(m.bytes).exchange(0, memory_order_relaxed));
  }
  dev32(m.lock).store(0, memory_order_release);
  look();
}

// A committer that persisted `bytes` itself (a direct commit in an adaptive launch).
__device__ inline void monitor_persisted(const heap_view& v, std::uint64_t bytes) {
  monitor_count(v, bytes);
  monitor_tick(v);
}

// Adaptive launches (v.marks set), at a block's start: thread 0's note of the chunks the block's
// log holds persisted, taken before any thread of the block commits (for finish_launch).
__device__ inline std::uint64_t persisted_at_start(const heap_view& v) {
  if (v.marks == nullptr) return 0;
  std::uint64_t chunks = 0;
  if (threadIdx.x == 0) {
    chunks = dev64(v.logs_state[log_of_block(v)].persisted).load(memory_order_relaxed);
  }
  __syncthreads();
  return chunks;
}

// Adaptive launches, at a block's end: once every thread of the block is done, adds what its log
// gained since `start` (persisted_at_start) to the launch's count, and the block that finishes
// last writes the stop of the launch's marks. That was a kernel of its own after each launch; on
// short launches (Hashtable H1's 0.5 ms) such bookkeeping was a measurable share of the mode's
// time.
__device__ inline void finish_launch(const heap_view& v, std::uint64_t start) {
  if (v.marks == nullptr) return;
  __syncthreads();
  if (threadIdx.x != 0) return;
  bandwidth_monitor& m = *v.monitor;
  const std::uint64_t mine =
      dev64(v.logs_state[log_of_block(v)].persisted).load(memory_order_relaxed) - start;
  if (mine != 0) dev64(m.chunks).fetch_add(mine, memory_order_relaxed);
  // The release carries the block's work (its commits' sequence numbers, its chunks) to the last
  // block, whose acquire sees every block's.
  if (dev32(m.blocks_done).fetch_add(1, memory_order_acq_rel) + 1 != gridDim.x) return;
  launch_marks& marks = *v.marks;
  marks.stop_seq = dev64(*v.seq).load(memory_order_relaxed);
  marks.stop_ns = global_time_ns();
  marks.chunks = dev64(m.chunks).load(memory_order_relaxed);
  atomic_ref<std::uint64_t, thread_scope::system>(marks.done).store(v.launch, memory_order_release);
}

// Where one commit's record goes.
struct placement {
  std::uint64_t seq = 0;       // its sequence number
  std::uint64_t pos = 0;       // log stream position of its first chunk
  std::uint64_t ring_pos = 0;  // ring position of its first chunk, when it goes through the ring
  bool via_ring = false;
  std::uint32_t width = 1;   // its striped group's width: its chunks lie `width` positions apart
  std::uint32_t member = 0;  // its rank in the group
};

// ---- one transaction ------------------------------------------------------------------------

enum class commit_step { retry, done, record };

// What one lane's attempt holds: the orecs it owns and its redo write set, both bounded.
// After a failed access (a conflict, a full set, a bad index, cancel()) the attempt is doomed:
// reads return 0, writes are ignored, and run() retries it or reports the failure.
template <unsigned MaxLocks, unsigned MaxWrites, bool Versioned>
class transaction {
  static_assert(MaxLocks >= 1 && MaxWrites >= 1, "read and write sets hold at least one entry");
  static_assert(MaxWrites <= kMaxPairs, "a record's head counts at most kMaxPairs (4095) writes");

 public:
  __device__ transaction(const heap_view& v, std::uint64_t slot) : v_(v), slot_(slot) {}

  // The word's value as this transaction sees it (its own writes included).
  __device__ std::uint32_t read(std::uint64_t word) {
    std::uint32_t value = 0;
    if constexpr (Versioned) {
      read_versioned(word, 1, &value);
    } else if (acquire_words(word, 1)) {
      value = value_of(static_cast<std::uint32_t>(word));
    }
    return value;
  }
  __device__ void write(std::uint64_t word, std::uint32_t value) {
    if (acquire_words(word, 1)) buffer(static_cast<std::uint32_t>(word), value);
  }
  // A value of sizeof(T) / 4 consecutive words starting at `word`, all locked before any is
  // read (versioned reads: all checked again after all are read), so a 64-bit or larger value is
  // never torn.
  template <class T>
  __device__ T read_as(std::uint64_t word) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0, "T must be whole words");
    std::uint32_t w[sizeof(T) / 4] = {};
    if constexpr (Versioned) {
      read_versioned(word, sizeof(T) / 4, w);
    } else if (acquire_words(word, sizeof(T) / 4)) {
      for (std::uint32_t i = 0; i < sizeof(T) / 4; ++i) {
        w[i] = value_of(static_cast<std::uint32_t>(word + i));
      }
    }
    T out;
    std::memcpy(&out, w, sizeof out);
    return out;
  }
  template <class T>
  __device__ void write_as(std::uint64_t word, const T& value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0, "T must be whole words");
    std::uint32_t w[sizeof(T) / 4];
    std::memcpy(w, &value, sizeof w);
    if (!acquire_words(word, sizeof(T) / 4)) return;
    for (std::uint32_t i = 0; i < sizeof(T) / 4; ++i) {
      buffer(static_cast<std::uint32_t>(word + i), w[i]);
    }
  }
  // Ends the transaction without writing anything: run() returns tx_status::cancelled.
  __device__ void cancel() { fail(tx_status::cancelled); }
  // False once this attempt cannot commit (failed access, cancel, or aborted by a conflicting
  // transaction): a body that loops on values it read should check it.
  __device__ bool ok() const {
    return state_ == running &&
           dev64(v_.status[slot_]).load(memory_order_relaxed) == status_word(attempt_, kActive);
  }
  GPM_HOST_DEVICE std::uint64_t words() const { return v_.words; }

  // ---- used by run() ----

  __device__ void begin(std::uint64_t attempt) {
    attempt_ = attempt;
    mine_ = orec_word(slot_, attempt);
    locks_ = 0;
    writes_ = 0;
    state_ = running;
    blocker_ = kNoBlocker;
    // One fence orders this status before every orec the attempt takes (a thread that finds one
    // of them owned by this attempt reads the owner's status next, owner_yields): the orecs' CASes
    // are then acquires alone, where each was a release too, a GPU-wide fence per orec taken.
    dev64(v_.status[slot_]).store(status_word(attempt, kActive), memory_order_relaxed);
    atomic_thread_fence<thread_scope::device>(memory_order_acq_rel);
  }

  // Between a failed attempt and the next: when the attempt met an orec it could not take and
  // commits persist their records in the committing thread, or when that orec's owner was
  // committing, waits until the orec changes hands, holding nothing (the attempt released its
  // orecs), for at most kBlockerRounds polls; otherwise backs off by the attempts made. A
  // committing owner holds its orecs through its sequence number (and, committing directly, its
  // record's persist), microseconds, and an attempt retried after pause()'s 32 ns to 2 us ran into
  // it again: ATM A1's helpers aborted 4.4-5.6 times per commit on H100s against 1.1 without
  // persistence, each abort a begin and an end, a device fence each. An owner that merely
  // outranks this attempt may run on for long: where commits persist nothing or hand their
  // records to the ring, waiting for it cost more than it saved (on an H200, ATM A1 ran 9-14%
  // slower in helpers mode and 6-7% in volatile when every blocker was waited for).
  __device__ void await_blocker(std::uint32_t attempts) const {
    const bool committing = (blocker_ & kCommittingOwner) != 0;
    if (blocker_ == kNoBlocker || v_.mode == tx_mode::volatile_only ||
        (use_ring(v_) && !committing)) {
      return pause(attempts);
    }
    dev64 orec(v_.orecs[blocker_ & ~kCommittingOwner]);
    for (std::uint32_t round = 0;
         round < kBlockerRounds && orec.load(memory_order_relaxed) == blocker_word_; ++round) {
      pause(round);
    }
  }

  // After the body: commits what needs no record, gives up or fails, or reports the chunks of
  // the record it needs (then the caller orders it and calls publish()).
  __device__ commit_step prepare(tx_result& r, std::uint64_t& chunks) {
    if (Versioned && state_ == running) validate_reads();
    // Relaxed: whether this CAS or a stealer's ACTIVE -> ABORTED comes first on the status word
    // decides the race, whatever the orders around it; what follows is ordered by end()'s fence,
    // and with versioned reads by apply()'s release of each version (which orders this CAS before
    // it, so a reader that sees a raised version sees the owner COMMITTING).
    std::uint64_t expected = status_word(attempt_, kActive);
    if (state_ == conflict ||
        !dev64(v_.status[slot_])
             .compare_exchange_strong(expected, status_word(attempt_, kCommitting),
                                      memory_order_relaxed)) {
      end(kAborted);
      ++v_.counters[kCounters * slot_ + 1];
      return commit_step::retry;
    }
    if (state_ == failed) return finish(r, failure_);
    if (writes_ == 0 || v_.mode == tx_mode::volatile_only) {
      apply();
      return finish(r, tx_status::committed);
    }
    chunks = record_chunks(writes_);
    // Only helpers mode has no other way for a record larger than the ring.
    if (chunks > record_room(v_, v_.mode == tx_mode::helpers && v_.ring != nullptr)) {
      return finish(r, tx_status::record_too_large);
    }
    return commit_step::record;
  }

  // Writes the record where `o` says (persisted into the block's log, or into the ring for the
  // helpers), applies the write set to the working copy, releases.
  __device__ void publish(tx_result& r, const placement& o);
  // Undo mode: logs the old values in the thread's undo slot, writes the new ones into the home
  // image, retires the undo record, each step persisted, then applies the write set.
  __device__ void commit_in_place(tx_result& r, std::uint64_t seq);

 private:
  enum run_state : std::uint32_t { running, conflict, failed };
  static constexpr std::uint64_t kNoBlocker = ~0ull;
  static constexpr std::uint64_t kCommittingOwner = 1ull << 62;  // in blocker_ (orecs <= 2^30)
  static constexpr std::uint32_t kBlockerRounds = 64;  // about 100 us at pause()'s longest
  // Versioned reads: a held_ entry with kReadBit is an orec read, not taken: its index (low 32
  // bits; at most 2^30 orecs) and the version the read saw (bits 32-62).
  static constexpr std::uint64_t kReadBit = 1ull << 63;
  static constexpr std::uint64_t kIndexMask = 0xffffffffull;
  GPM_HOST_DEVICE static std::uint64_t read_entry(std::uint64_t o, std::uint32_t version) {
    return kReadBit | std::uint64_t{version & 0x7fffffffu} << 32 | o;
  }
  GPM_HOST_DEVICE static std::uint32_t version_of(std::uint64_t entry) {
    return static_cast<std::uint32_t>(entry >> 32) & 0x7fffffffu;
  }
  // Whether orec o's version is still the one read entry `entry` noted.
  __device__ bool version_unchanged(std::uint64_t o, std::uint64_t entry) const {
    return (dev32(v_.versions[o]).load(memory_order_relaxed) & 0x7fffffffu) == version_of(entry);
  }
  // Dooms the attempt on orec o, held as `rec` by a transaction this one may not take it from
  // (`committing`: because it is committing): the next attempt may wait for o to change hands
  // (await_blocker). Whether the owner was committing rides in blocker_'s kCommittingOwner bit,
  // and acquire_orec reads the owner's status again to learn it: a flag of its own, carried from
  // attempt to attempt, and a three-way answer from owner_yields took registers (ATM's kernel 80
  // a thread instead of 72, which left room for 2 blocks of 288 threads an SM instead of 3; BVH's
  // build 112 instead of 94).
  __device__ void blocked_by(std::uint64_t o, std::uint64_t rec, bool committing) {
    state_ = conflict;
    blocker_ = committing ? o | kCommittingOwner : o;
    blocker_word_ = rec;
  }

  __device__ void fail(tx_status s) {
    if (state_ != running) return;
    state_ = failed;
    failure_ = s;
  }
  // Whether the attempt may still access words [word, word + n): running, and in range.
  __device__ bool accessible(std::uint64_t word, std::uint32_t n) {
    if (state_ != running) return false;
    if (word >= v_.words || n > v_.words - word) {
      fail(tx_status::out_of_range);
      return false;
    }
    return true;
  }
  __device__ bool acquire_words(std::uint64_t word, std::uint32_t n) {
    if (!accessible(word, n)) return false;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!acquire_orec((word + i) & v_.orec_mask)) return false;
    }
    return true;
  }

  // Fig. 2's lock acquisition, with the COMMITTING rule. With versioned reads an orec this
  // attempt noted as read (at held_[read_at]) is taken in place of its read entry, and the read
  // stands only if the orec's version is still the one it saw.
  __device__ bool acquire_orec(std::uint64_t o) {
    std::uint32_t read_at = MaxLocks;
    if constexpr (!Versioned) {
      for (std::uint32_t i = 0; i < locks_; ++i) {
        if (held_[i] == o) return true;
      }
    } else {
      for (std::uint32_t i = 0; i < locks_; ++i) {
        if ((held_[i] & kIndexMask) != o) continue;
        if ((held_[i] & kReadBit) == 0) return true;
        read_at = i;
        break;
      }
    }
    if (read_at == MaxLocks && locks_ == MaxLocks) {
      fail(tx_status::read_set_full);
      return false;
    }
    dev64 orec(v_.orecs[o]);
    std::uint64_t cur = orec.load(memory_order_acquire);
    for (int tries = 0; tries < 4; ++tries) {
      if (cur != 0 && !owner_yields(cur)) break;
      if (orec.compare_exchange_strong(cur, mine_, memory_order_acquire)) {  // begin() fenced
        if (read_at == MaxLocks) {
          held_[locks_++] = o;
          return true;
        }
        const std::uint64_t read = held_[read_at];
        held_[read_at] = o;  // released in end() like any orec taken
        if (version_unchanged(o, read)) return true;
        state_ = conflict;  // a commit wrote the orec after the read
        return false;
      }
    }
    if (cur != 0) {
      blocked_by(o, cur, owner_committing(cur));
    } else {
      state_ = conflict;  // it came free, after four lost CASes
    }
    return false;
  }

  // Versioned reads (heap_view::versions): words [word, word + n) read without taking their
  // orecs, into out. Each orec's version is noted (note_read), the values are read, then every
  // version is read again: unchanged, no commit wrote the words in between (a commit raises the
  // versions before it writes, apply). A conflict dooms the attempt.
  __device__ void read_versioned(std::uint64_t word, std::uint32_t n, std::uint32_t* out) {
    if (!accessible(word, n)) return;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!note_read((word + i) & v_.orec_mask)) return;
    }
    for (std::uint32_t i = 0; i < n; ++i) out[i] = value_of(static_cast<std::uint32_t>(word + i));
    atomic_thread_fence<thread_scope::device>(memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!read_still_valid((word + i) & v_.orec_mask)) {
        state_ = conflict;
        for (std::uint32_t k = 0; k < n; ++k) out[k] = 0;
        return;
      }
    }
  }

  // Notes orec o in the read set with its version, unless this attempt holds it or read it
  // already. A commit that holds it and has begun committing may be raising its version and
  // writing: a conflict (the attempt then waits for that orec, await_blocker). The version is read
  // before the orec's owner: an owner still ACTIVE after it has not raised it yet.
  __device__ bool note_read(std::uint64_t o) {
    for (std::uint32_t i = 0; i < locks_; ++i) {
      if ((held_[i] & kIndexMask) == o) return true;
    }
    if (locks_ == MaxLocks) {
      fail(tx_status::read_set_full);
      return false;
    }
    const std::uint32_t version = dev32(v_.versions[o]).load(memory_order_acquire);
    const std::uint64_t rec = dev64(v_.orecs[o]).load(memory_order_acquire);
    if (rec != 0 && owner_committing(rec)) {
      blocked_by(o, rec, true);
      return false;
    }
    held_[locks_++] = read_entry(o, version);
    return true;
  }

  // Whether the read of orec o (held, or noted) still stands: held, or at the version noted.
  __device__ bool read_still_valid(std::uint64_t o) const {
    for (std::uint32_t i = 0; i < locks_; ++i) {
      if ((held_[i] & kIndexMask) != o) continue;
      if ((held_[i] & kReadBit) == 0) return true;
      return version_unchanged(o, held_[i]);
    }
    return false;
  }

  // Before the commit (versioned reads): a transaction that writes takes the orecs it only read,
  // so that no commit can write them between this check and its sequence number, and checks
  // that their versions are the ones it saw; a read-only one checks the versions alone, and is
  // ordered at this check (a commit that raised none of them has not written what it read).
  __device__ void validate_reads() {
    for (std::uint32_t i = 0; i < locks_; ++i) {
      const std::uint64_t e = held_[i];
      if ((e & kReadBit) == 0) continue;
      const std::uint64_t o = e & kIndexMask;
      if (writes_ != 0 && !acquire_orec(o)) return;  // acquire_orec checks the version
      if (writes_ == 0 && !version_unchanged(o, e)) {
        state_ = conflict;
        return;
      }
    }
  }

  // Whether the attempt that holds an orec (value `rec`) is committing: it may be raising the
  // orec's version and writing its words.
  __device__ bool owner_committing(std::uint64_t rec) const {
    const std::uint64_t owner = (rec >> 32) - 1;
    if (owner >= v_.max_threads) return false;
    const std::uint64_t s = dev64(v_.status[owner]).load(memory_order_acquire);
    return attempt_tag(s >> 2) == static_cast<std::uint32_t>(rec) && state_of(s) == kCommitting;
  }

  // Whether the attempt that holds an orec (value `rec`) lets us take it: it is over, or we
  // aborted it just now. False when it is committing or outranks us.
  __device__ bool owner_yields(std::uint64_t rec) const {
    const std::uint64_t owner = (rec >> 32) - 1;
    if (owner >= v_.max_threads) return true;  // not a live owner's record
    dev64 st(v_.status[owner]);
    std::uint64_t s = st.load(memory_order_acquire);
    for (;;) {
      const bool same_attempt = attempt_tag(s >> 2) == static_cast<std::uint32_t>(rec);
      if (!same_attempt || state_of(s) == kAborted || state_of(s) == kIdle) return true;
      if (state_of(s) == kCommitting || owner < slot_) return false;
      if (st.compare_exchange_strong(s, status_word(s >> 2, kAborted), memory_order_acq_rel)) {
        return true;
      }
    }
  }

  __device__ std::uint32_t value_of(std::uint32_t word) const {
    for (std::uint32_t i = 0; i < writes_; ++i) {
      if (words_[i] == word) return values_[i];
    }
    return dev32(v_.work[word]).load(memory_order_relaxed);
  }
  __device__ void buffer(std::uint32_t word, std::uint32_t value) {
    for (std::uint32_t i = 0; i < writes_; ++i) {
      if (words_[i] == word) {
        values_[i] = value;
        return;
      }
    }
    if (writes_ == MaxWrites) {
      fail(tx_status::write_set_full);
      return;
    }
    words_[writes_] = word;
    values_[writes_++] = value;
  }

  // With versioned reads, the versions of the orecs written are raised first (a release: a reader
  // that sees one of the new values then sees its orec's new version, read_versioned), under the
  // orecs, which this attempt holds.
  __device__ void apply() const {
    if (Versioned && writes_ != 0) {
      for (std::uint32_t i = 0; i < writes_; ++i) {
        dev32 version(v_.versions[words_[i] & v_.orec_mask]);
        // A release: a reader that reads the new version then sees this attempt COMMITTING.
        version.store(version.load(memory_order_relaxed) + 1, memory_order_release);
      }
      atomic_thread_fence<thread_scope::device>(memory_order_release);
    }
    for (std::uint32_t i = 0; i < writes_; ++i) {
      dev32(v_.work[words_[i]]).store(values_[i], memory_order_relaxed);
    }
  }
  // Releases the orecs this attempt still owns and leaves its status in `state`, all after one
  // release fence (a fence and a strong write are a release), where each was a release of its own,
  // a GPU-wide fence each. Nothing needs the status after the orecs: a thread that finds this
  // attempt over while it still holds an orec takes the orec, and the release's CAS then fails.
  // Its loop, and acquire_orec's, stay unrolled: rolled (GPM_UNROLL_1) they made every mode
  // slower, volatile ATM A1 by 17% on an H200, where rolling the record's loops made the commit
  // path faster.
  __device__ void end(std::uint64_t state) {
    atomic_thread_fence<thread_scope::device>(memory_order_release);
    for (std::uint32_t i = 0; i < locks_; ++i) {
      if (Versioned && (held_[i] & kReadBit) != 0) continue;  // read, not taken
      std::uint64_t expected = mine_;
      dev64(v_.orecs[held_[i]]).compare_exchange_strong(expected, 0, memory_order_relaxed);
    }
    locks_ = 0;
    dev64(v_.status[slot_]).store(status_word(attempt_, state), memory_order_relaxed);
  }
  __device__ commit_step finish(tx_result& r, tx_status s) {
    end(kIdle);
    r.status = s;
    if (s == tx_status::committed) ++v_.counters[kCounters * slot_];
    return commit_step::done;
  }

  const heap_view& v_;  // the caller's view, which outlives the transaction
  std::uint64_t slot_;
  std::uint64_t attempt_ = 0;
  std::uint64_t mine_ = 0;
  run_state state_ = running;
  tx_status failure_ = tx_status::committed;
  std::uint32_t locks_ = 0;
  std::uint32_t writes_ = 0;
  std::uint64_t blocker_ = kNoBlocker;  // the orec that ended the last attempt (await_blocker)
  std::uint64_t blocker_word_ = 0;      // its value then
  std::uint64_t held_[MaxLocks];
  std::uint32_t words_[MaxWrites];
  std::uint32_t values_[MaxWrites];
};

// ---- ordering commits -----------------------------------------------------------------------

// Waits until [pos, pos + chunks) is free in `log`'s ring in the pool: the host has applied
// everything before pos + chunks - log_chunks.
__device__ inline void wait_for_log_space(const heap_view& v, std::uint32_t log,
                                          std::uint64_t& head_seen, std::uint64_t end) {
  for (std::uint32_t round = 0; end > head_seen + v.log_chunks; ++round) {
    head_seen = atomic_ref<std::uint64_t, thread_scope::system>(v.control[log].head)
                    .load(memory_order_acquire);
    if (end > head_seen + v.log_chunks) pause(round);
  }
}

__device__ inline std::uint32_t log_of(const heap_view& v) {
  return v.ring != nullptr ? blockIdx.x : log_of_block(v);
}

// Serves every pending request of the block: takes the list, one global atomic for all their
// sequence numbers, and consecutive log and ring positions, in list order. The requesters all
// hold their orecs, so none conflicts with another and any order among them is a conflict order.
// Called with the block's order lock held.
__device__ inline void serve_requests(const heap_view& v) {
  ring_control* ring = v.ring;
  reservation_request* req = ring_requests(v);
  const std::uint32_t list = blk32(ring->pending).exchange(0, memory_order_acquire);
  std::uint64_t count = 0;
  for (std::uint32_t i = list; i != 0; i = req[i - 1].next) count += req[i - 1].count;
  if (count == 0) return;
  std::uint64_t seq = dev64(*v.seq).fetch_add(count, memory_order_relaxed) + 1;
  std::uint64_t pos = dev64(ring->stream.next).load(memory_order_relaxed);
  std::uint64_t ring_pos = blk64(ring->reserved).load(memory_order_relaxed);
  for (std::uint32_t i = list; i != 0;) {
    reservation_request& r = req[i - 1];
    i = r.next;
    // Everything of the request is read before `seq` is set: from then on its owner may post
    // its next request in the same place.
    const std::uint64_t chunks = r.chunks, through_ring = r.ring_chunks;
    const std::uint32_t n = r.count;
    r.chunks = pos;
    r.ring_chunks = ring_pos;
    pos += chunks;
    ring_pos += through_ring;
    blk64(r.seq).store(seq, memory_order_release);
    seq += n;
  }
  dev64(ring->stream.next).store(pos, memory_order_relaxed);
  blk64(ring->reserved).store(ring_pos, memory_order_release);
}

// reserve() in launches with a ring (flat combining): the worker posts its request on the
// block's list, and whoever takes the block's order lock serves every request posted so far.
// A block then makes one global atomic per batch of waiting workers instead of one per worker,
// each under the lock: with the lock held through the atomic's latency, the block's commits
// were serialized at that latency.
__device__ inline placement reserve_combined(const heap_view& v, std::uint32_t count,
                                             std::uint64_t chunks, bool via_ring) {
  ring_control* ring = v.ring;
  reservation_request& mine = ring_requests(v)[threadIdx.x];
  mine.count = count;
  mine.chunks = chunks;
  mine.ring_chunks = via_ring ? chunks : 0;
  blk64(mine.seq).store(0, memory_order_relaxed);
  std::uint32_t head = blk32(ring->pending).load(memory_order_relaxed);
  do {
    mine.next = head;
  } while (
      !blk32(ring->pending).compare_exchange_weak(head, threadIdx.x + 1, memory_order_release));
  for (std::uint32_t round = 0; blk64(mine.seq).load(memory_order_acquire) == 0; ++round) {
    std::uint32_t unlocked = 0;
    if (blk32(ring->stream.lock).compare_exchange_strong(unlocked, 1, memory_order_acquire)) {
      serve_requests(v);
      blk32(ring->stream.lock).store(0, memory_order_release);
    } else {
      pause(round);
    }
  }
  placement o;
  o.via_ring = via_ring;
  o.seq = blk64(mine.seq).load(memory_order_relaxed);
  o.pos = mine.chunks;
  o.ring_pos = mine.ring_chunks;
  return o;
}

// Takes `count` sequence numbers and `chunks` chunks of the log stream together (and as many
// ring positions when `via_ring`), under the order lock of the block (launches with a ring, where
// ring and direct commits share the block's log: reserve_combined) or of its log. Only positions
// are handed out here: the lock is held for counter updates and one global atomic, and waiting
// for the space (wait_for_space) happens after the committer has released its orecs.
__device__ inline placement reserve(const heap_view& v, std::uint32_t count, std::uint64_t chunks,
                                    bool via_ring) {
  placement o;
  o.via_ring = via_ring;
  if (v.mode == tx_mode::undo) {  // undo records lie in their threads' own slots
    o.seq = dev64(*v.seq).fetch_add(count, memory_order_relaxed) + 1;
    return o;
  }
  if (v.ring != nullptr) return reserve_combined(v, count, chunks, via_ring);
  log_state& ls = v.logs_state[log_of(v)];
  lock_order(dev32(ls.lock));
  o.pos = dev64(ls.next).load(memory_order_relaxed);
  o.seq = dev64(*v.seq).fetch_add(count, memory_order_relaxed) + 1;
  dev64(ls.next).store(o.pos + chunks, memory_order_relaxed);
  dev32(ls.lock).store(0, memory_order_release);
  return o;
}

// Waits until the chunks `o` placed can be written: [pos, pos + span) is free in the block's log
// in the pool, and, through the ring, [ring_pos, ring_pos + chunks) is free in the ring. Every
// wait is on positions handed out before the caller's (and on the host applying records of lower
// sequence numbers, which lie earlier in their logs), so waits never form a cycle.
__device__ inline void wait_for_space(const heap_view& v, const placement& o,
                                      std::uint64_t chunks) {
  const std::uint32_t log = log_of(v);
  log_state& ls = v.ring != nullptr ? v.ring->stream : v.logs_state[log];
  const std::uint64_t end = o.pos + (chunks - 1) * o.width + 1;
  std::uint64_t head = dev64(ls.head_seen).load(memory_order_relaxed);
  if (end > head + v.log_chunks) {
    wait_for_log_space(v, log, head, end);
    dev64(ls.head_seen).fetch_max(head, memory_order_relaxed);
  }
  if (!o.via_ring) return;
  for (std::uint32_t round = 0;
       o.ring_pos + chunks > blk64(v.ring->persisted).load(memory_order_acquire) + v.ring_chunks;
       ++round) {
    pause(round);
  }
}

// `op` over the ranks up to the caller's (every member calls).
template <class Group, class Op>
__device__ inline std::uint64_t inclusive_scan(const Group& g, std::uint64_t x, Op op) {
  const unsigned rank = g.thread_rank();
  for (unsigned o = 1; o < g.size(); o *= 2) {
    const std::uint64_t below = g.shfl(x, rank >= o ? rank - o : rank);
    if (rank >= o) x = op(x, below);
  }
  return x;
}

// What a group's commit bookkeeping needs of its members' chunk counts: the sum over the members
// below the caller, the sum over all, and (when `want_most`) the largest.
struct group_counts {
  std::uint64_t before = 0;
  std::uint64_t total = 0;
  std::uint64_t most = 0;
};

// A tile (its ranks are its lanes, 0 .. size - 1): scans over the ranks.
template <class Group>
__device__ inline group_counts counts_of(const Group& g, std::uint64_t x, bool want_most) {
  const auto add = [](std::uint64_t a, std::uint64_t b) { return a + b; };
  const auto max = [](std::uint64_t a, std::uint64_t b) { return a > b ? a : b; };
  const unsigned last = g.size() - 1;
  const std::uint64_t upto = inclusive_scan(g, x, add);
  return {upto - x, g.shfl(upto, last), want_most ? g.shfl(inclusive_scan(g, x, max), last) : 0};
}

// The lanes of the calling warp that reach this point together (__activemask), as a group with
// a tile's operations in lane space (a member's rank is its lane, and ranks have gaps where lanes
// are not members): what commits aggregate over when each thread runs its own transactions (tile
// of one), so that the lanes committing at once take one reservation (and, in hcl mode, write
// adjacent chunks). Lane space, because these lanes seldom form one run: on ATM A1 (H100) about 5
// of 32 were active, and mapping ranks to lanes (a loop a shuffle) and compacting ballots to ranks
// cost 8% of the helpers kernel's instructions, and the compaction 10% of volatile mode's.
class active_lanes {
 public:
  __device__ active_lanes() : mask_(__activemask()), lane_(lane_id()) {}
  __device__ unsigned thread_rank() const { return lane_; }
  // Bit l set when member lane l passes `p`.
  __device__ unsigned ballot(bool p) const { return __ballot_sync(mask_, p); }
  template <class T>
  __device__ T shfl(T x, unsigned lane) const {
    return __shfl_sync(mask_, x, static_cast<int>(lane));
  }
  __device__ unsigned mask() const { return mask_; }

 private:
  unsigned mask_;
  unsigned lane_;
};

// The active lanes: warp reductions, and the sum below the caller bit by bit (a ballot for each
// bit of the largest count). A count is a record's chunks, below 2^12, so sums fit 32 bits.
__device__ inline group_counts counts_of(const active_lanes& g, std::uint64_t x, bool) {
  const unsigned mask = g.mask();
  const unsigned below = mask & ((1u << g.thread_rank()) - 1);
  const auto x32 = static_cast<std::uint32_t>(x);
  const std::uint32_t most = __reduce_max_sync(mask, x32);
  std::uint64_t before = 0;
  for (unsigned b = 0; b < 32 && (most >> b) != 0; ++b) {
    const unsigned ones = __ballot_sync(mask, ((x32 >> b) & 1u) != 0) & below;
    before += std::uint64_t{static_cast<unsigned>(__popc(ones))} << b;
  }
  return {before, __reduce_add_sync(mask, x32), most};
}

// The group's commit bookkeeping: the members whose transaction needs a record get consecutive
// sequence numbers from one reservation by the first of them (warp-aggregated), and space for
// their records: end to end, or in hcl mode striped (member i's chunk j at P + j * width + i,
// so the members' stores of chunk j are adjacent). When that space exceeds what one reservation
// may take, each member reserves its own record.
template <class Group, class Tx>
__device__ inline void order_and_publish(const heap_view& v, const Group& g, Tx& t, bool needs,
                                         std::uint64_t chunks, tx_result& r) {
  const unsigned mask = g.ballot(needs);
  if (mask == 0) return;
  const unsigned rank = g.thread_rank();
  const unsigned leader = __ffs(static_cast<int>(mask)) - 1;
  const bool via_ring = g.shfl(static_cast<unsigned>(use_ring(v)), leader) != 0;
  const bool striped = v.mode == tx_mode::hcl;
  const group_counts n = counts_of(g, needs ? chunks : 0, striped);
  const std::uint32_t width = __popc(mask);
  const std::uint64_t total = striped ? n.most * width : n.total;
  placement o;
  if (v.mode == tx_mode::undo || total <= record_room(v, via_ring)) {
    if (rank == leader) o = reserve(v, width, total, via_ring);
    const std::uint32_t member = __popc(mask & ((1u << rank) - 1));
    o.seq = g.shfl(o.seq, leader) + member;
    o.pos = g.shfl(o.pos, leader) + (striped ? member : n.before);
    o.ring_pos = g.shfl(o.ring_pos, leader) + n.before;
    o.via_ring = via_ring;
    o.width = striped ? width : 1;
    o.member = striped ? member : 0;
  } else if (needs) {
    o = reserve(v, 1, chunks, via_ring && chunks <= record_room(v, true));
  }
  if (needs) t.publish(r, o);
}

// The undo slot of thread slot `slot`: its log and the position of its first chunk. The 32 lanes
// of a warp share 32 * undo_depth chunks of one log, interleaved by lane (HCL); a warp's slots
// lie after those of the warps before it on the same log.
struct undo_slot {
  std::uint32_t log;
  std::uint64_t pos;
};
GPM_HOST_DEVICE inline undo_slot undo_slot_of(const heap_view& v, std::uint64_t slot) {
  const std::uint64_t warp = slot / 32;
  return {static_cast<std::uint32_t>(warp % v.logs), warp / v.logs * 32 * v.undo_depth + slot % 32};
}

template <unsigned MaxLocks, unsigned MaxWrites, bool Versioned>
__device__ void transaction<MaxLocks, MaxWrites, Versioned>::commit_in_place(tx_result& r,
                                                                             std::uint64_t seq) {
  std::uint32_t old[MaxWrites];
  for (std::uint32_t i = 0; i < writes_; ++i) {
    old[i] = dev32(v_.work[words_[i]]).load(memory_order_relaxed);  // what the home image holds
  }
  const undo_slot at = undo_slot_of(v_, slot_);
  record_source rec{seq, writes_, words_, old, 0, 32, static_cast<std::uint32_t>(slot_ % 32)};
  rec.checksum =
      record_checksum(rec, writes_, record_seed(undo_salt(v_.salt), v_.epoch, at.log, at.pos));
  ulonglong2* data = v_.log_data + std::uint64_t{at.log} * v_.log_chunks;
  const std::uint64_t chunks = record_chunks(writes_);
  data[at.pos] = ulonglong2{rec.head, rec.checksum};
  GPM_UNROLL_1
  for (std::uint64_t j = 1; j < chunks; ++j) {
    data[at.pos + 32 * j] = ulonglong2{rec.pair(2 * j - 2), rec.pair(2 * j - 1)};
  }
  persist_each_at("tx.undo.log", chunks, kChunkBytes,
                  [&](std::uint64_t j) { return data + at.pos + 32 * j; });
  kernel_crash_point("tx.undo.logged");
  for (std::uint32_t i = 0; i < writes_; ++i) v_.home[words_[i]] = values_[i];
  persist_each_at("tx.undo.home", writes_, sizeof(std::uint32_t),
                  [&](std::uint64_t i) { return v_.home + words_[i]; });
  kernel_crash_point("tx.undo.written");
  // Retired: with its head cleared the record never validates. Done while the orecs are held, so
  // at most one live undo record covers a word.
  data[at.pos].x = 0;
  gpm::persist_at("tx.undo.retire", &data[at.pos], kChunkBytes);
  dev64(v_.logs_state[at.log].persisted).fetch_add(chunks, memory_order_relaxed);
  apply();
  r.seq = seq;
  finish(r, tx_status::committed);
}

// A redo commit: the write set goes to the working copy and the orecs are released first, since
// the sequence number already orders this commit before any conflicting one that follows (which
// becomes durable only after it, see tx_heap::durable_seq); then the record is written where `o`
// says: persisted into the block's log, or into the ring for the helpers.
template <unsigned MaxLocks, unsigned MaxWrites, bool Versioned>
__device__ void transaction<MaxLocks, MaxWrites, Versioned>::publish(tx_result& r,
                                                                     const placement& o) {
  if (v_.mode == tx_mode::undo) return commit_in_place(r, o.seq);
  apply();
  finish(r, tx_status::committed);
  r.seq = o.seq;
  const bool grouped = o.width > 1;
  record_source rec{
      o.seq, writes_, words_, values_, 0, grouped ? o.width : 0u, grouped ? o.member : 0u};
  const std::uint32_t log = log_of(v_);
  // The log's part of the seed: computed once per block by tx_heap::launch's kernel, per record
  // in a kernel of the caller's (whose view serves every block).
  const std::uint64_t key =
      v_.workers_per_block != 0 ? v_.log_key : log_seed(v_.salt, v_.epoch, log);
  rec.checksum = record_checksum(rec, writes_, record_seed_in(key, o.pos));
  const std::uint64_t chunks = record_chunks(writes_);
  wait_for_space(v_, o, chunks);
  if (o.via_ring) {
    ulonglong2* ring = ring_chunks(v_);
    std::uint32_t* flags = ring_flags(v_);
    std::uint32_t* where = ring_log_index(v_);
    const std::uint64_t ring_at = o.ring_pos % v_.ring_chunks, log_at = o.pos % v_.log_chunks;
    const auto put = [&](std::uint64_t j, ulonglong2 c) {
      const std::uint64_t at = ring_step(ring_at, j, v_.ring_chunks);
      ring[at] = c;
      where[at] = static_cast<std::uint32_t>(ring_step(log_at, j, v_.log_chunks));
      blk32(flags[at]).store(static_cast<std::uint32_t>(o.ring_pos + j + 1), memory_order_release);
    };
    // The first chunk (head and checksum) apart, so that neither stays live through the pairs'.
    put(0, ulonglong2{rec.head, rec.checksum});
    GPM_UNROLL_1
    for (std::uint64_t j = 1; j < chunks; ++j) {
      put(j, ulonglong2{rec.pair(2 * j - 2), rec.pair(2 * j - 1)});
    }
    ++v_.counters[kCounters * slot_ + 2];
    monitor_tick(v_);  // the helpers count what they persist; committers report it
  } else {
    ulonglong2* data = v_.log_data + std::uint64_t{log} * v_.log_chunks;
    const std::uint64_t log_at = o.pos % v_.log_chunks;
    const auto chunk = [&](std::uint64_t j) {
      return data + ring_step(log_at, j * o.width, v_.log_chunks);
    };
    *chunk(0) = ulonglong2{rec.head, rec.checksum};
    GPM_UNROLL_1
    for (std::uint64_t j = 1; j < chunks; ++j) {
      *chunk(j) = ulonglong2{rec.pair(2 * j - 2), rec.pair(2 * j - 1)};
    }
    kernel_crash_point("tx.commit.written");  // stored, not yet persisted
    persist_each_at("tx.commit.record", chunks, kChunkBytes, chunk);
    dev64(v_.logs_state[log].persisted).fetch_add(chunks, memory_order_relaxed);
    monitor_persisted(v_, chunks * kChunkBytes);
  }
}

// gpm::tx_ref::run: attempts until the transaction commits or fails; every lane of the tile
// calls it, each with its own transaction.
template <unsigned MaxLocks, unsigned MaxWrites, bool Versioned, class Tile, class Body>
__device__ tx_result run_attempts(const heap_view& v, const Tile& tile, Body& body) {
  tx_result r;
  const std::uint64_t slot = thread_slot(v);
  bool pending = slot < v.max_threads;
  if (!pending) r.status = tx_status::too_many_threads;
  std::uint64_t attempt = pending ? dev64(v.status[slot]).load(memory_order_relaxed) >> 2 : 0;
  transaction<MaxLocks, MaxWrites, Versioned> t(v, pending ? slot : 0);
  do {
    commit_step step = commit_step::done;
    std::uint64_t chunks = 0;
    if (pending) {
      t.begin(++attempt);
      ++r.attempts;
      body(t);
      step = t.prepare(r, chunks);
    }
    if constexpr (std::is_same_v<Tile, single_thread>) {
      order_and_publish(v, active_lanes(), t, step == commit_step::record, chunks, r);
    } else {
      order_and_publish(v, tile, t, step == commit_step::record, chunks, r);
    }
    if (step == commit_step::retry) {
      if (v.max_attempts != 0 && r.attempts >= v.max_attempts) {
        r.status = tx_status::too_many_aborts;
        pending = false;
      } else {
        t.await_blocker(r.attempts);
      }
    } else {
      pending = false;
    }
  } while (tile.any(pending));
  return r;
}

// A heap's read mode is known when the kernel runs, not when it is compiled: each mode gets its
// own instantiation of the transaction, so that the locked path, the paper's, carries no branch or
// code of versioned reads, and the versioned path none of the locked search.
template <unsigned MaxLocks, unsigned MaxWrites, class Tile, class Body>
__device__ tx_result run(const heap_view& v, const Tile& tile, Body& body) {
  if (v.versions != nullptr) return run_attempts<MaxLocks, MaxWrites, true>(v, tile, body);
  return run_attempts<MaxLocks, MaxWrites, false>(v, tile, body);
}

// ---- helper warps (tx_heap::launch with a ring) ---------------------------------------------

inline constexpr std::uint32_t kDrainBatch = 128;  // chunks a helper copies before one persist
// A helper that finds fewer filled chunks than a warp stores at once (one a lane) while the
// workers go on waits for more, at most kBatchWaits pauses (32 to 256 ns): a batch costs a
// claim, a persist (a fence a lane) and a publish whatever its size, and on ATM A1 (H100) the
// helper warps' loop, at 2.3 chunks a batch, issued 16% of the kernel's instructions.
inline constexpr std::uint32_t kFullBatch = 32;
inline constexpr std::uint32_t kBatchWaits = 4;

// Called by every thread of the block before the workers start: the block's log stream continues
// where the previous launch left it; ring positions start at 0 (no flag holds a position + 1).
__device__ inline void init_ring(const heap_view& v) {
  ring_control* ring = v.ring;
  std::uint32_t* flags = ring_flags(v);
  if (threadIdx.x == 0) {
    *ring = ring_control{};
    if (v.mode == tx_mode::adaptive) ring->on = dev32(v.monitor->on).load(memory_order_relaxed);
    ring->stream.next = v.logs_state[blockIdx.x].next;
    ring->stream.head_seen = v.logs_state[blockIdx.x].head_seen;
  }
  for (std::uint64_t i = threadIdx.x; i < v.ring_chunks; i += blockDim.x) flags[i] = 0;
  __syncthreads();
}

// The first helper warp's record of its ring's occupancy over time (kOccupancyBins): at each
// look lane 0 adds the time since its last look to the bin of what the ring holds now; each lane
// keeps two bins in registers, added to the heap's bins when the block ends.
class occupancy_sampler {
 public:
  static_assert(kOccupancyBins == 64, "two bins a lane");
  __device__ explicit occupancy_sampler(const heap_view& v)
      : on_(v.occupancy != nullptr && threadIdx.x - v.workers_per_block < 32),
        last_(on_ ? global_time_ns() : 0) {}
  // Lane 0's view: the ring holds `held` of its `size` chunks. Every lane of the warp calls it.
  __device__ void look(std::uint64_t held, std::uint64_t size) {
    if (!on_) return;
    std::uint32_t bin = 0;
    std::uint64_t dt = 0;
    if (threadIdx.x % 32 == 0) {
      const std::uint64_t now = global_time_ns();
      dt = now - last_;
      last_ = now;
      // In 32 bits (a 64-bit division is a long subroutine): a ring holds far fewer than 2^26
      // chunks, and more held than it has (committers waiting) goes to the last bin anyway.
      const auto n = static_cast<std::uint32_t>(size);
      const auto h = static_cast<std::uint32_t>(held < size ? held : size);
      const std::uint32_t b = h * kOccupancyBins / n;
      bin = b < kOccupancyBins ? b : kOccupancyBins - 1;
    }
    bin = __shfl_sync(~0u, bin, 0);
    dt = __shfl_sync(~0u, dt, 0);
    const unsigned lane = threadIdx.x % 32;
    if (bin == 2 * lane) low_ += dt;
    if (bin == 2 * lane + 1) high_ += dt;
  }
  __device__ void add_to(const heap_view& v) const {
    if (!on_) return;
    const unsigned lane = threadIdx.x % 32;
    if (low_ != 0) dev64(v.occupancy[2 * lane]).fetch_add(low_, memory_order_relaxed);
    if (high_ != 0) dev64(v.occupancy[2 * lane + 1]).fetch_add(high_, memory_order_relaxed);
  }

 private:
  bool on_;
  std::uint64_t last_;
  std::uint64_t low_ = 0, high_ = 0;  // bins 2 * lane and 2 * lane + 1
};

// A helper warp: copies filled ring chunks, in ring order, to their places in the block's log
// with coalesced 16-byte stores, persists each batch with one fence per lane, then counts them
// in order (two helpers may copy two batches at once) and frees the ring slots. Log space was
// taken when the records were reserved. Returns when the block's workers are done and everything
// they put in the ring is persisted.
__device__ inline void drain_ring(const heap_view& v) {
  ring_control* ring = v.ring;
  const ulonglong2* chunks = ring_chunks(v);
  const std::uint32_t* flags = ring_flags(v);
  const std::uint32_t* where = ring_log_index(v);
  const std::uint32_t log = blockIdx.x;
  ulonglong2* data = v.log_data + std::uint64_t{log} * v.log_chunks;
  const unsigned lane = threadIdx.x % 32;
  occupancy_sampler occupancy(v);
  for (std::uint32_t idle = 0, waits = 0;;) {
    // Lane 0 reads what the other helper may change; the warp works on one view of it.
    std::uint64_t c = 0;
    std::uint64_t held = 0;
    bool finished = false, done = false;
    if (lane == 0) {
      finished = blk32(ring->workers_done).load(memory_order_acquire) == v.workers_per_block;
      c = blk64(ring->claimed).load(memory_order_acquire);
      const std::uint64_t reserved = blk64(ring->reserved).load(memory_order_acquire);
      done = finished && reserved == c;
      held = reserved - blk64(ring->persisted).load(memory_order_relaxed);
    }
    occupancy.look(held, v.ring_chunks);
    c = __shfl_sync(~0u, c, 0);
    // At most a ring's worth is filled from c on.
    const std::uint64_t c_at = c % v.ring_chunks;
    const std::uint64_t scan = kDrainBatch < v.ring_chunks ? kDrainBatch : v.ring_chunks;
    std::uint64_t k = 0;
    for (std::uint32_t base = 0; base < scan; base += 32) {
      const std::uint64_t p = c + base + lane;
      const bool filled =
          base + lane < scan &&
          blk32(const_cast<std::uint32_t&>(flags[ring_step(c_at, base + lane, v.ring_chunks)]))
                  .load(memory_order_acquire) == static_cast<std::uint32_t>(p + 1);
      const unsigned filled_lanes = __ballot_sync(~0u, filled);
      const unsigned run = filled_lanes == ~0u ? 32 : __ffs(static_cast<int>(~filled_lanes)) - 1;
      k += run;
      if (run < 32) break;
    }
    if (k == 0) {
      if (__shfl_sync(~0u, static_cast<int>(done), 0) != 0) break;
      pause(idle++);
      continue;
    }
    idle = 0;
    if (k < kFullBatch && waits < kBatchWaits &&
        __shfl_sync(~0u, static_cast<int>(finished), 0) == 0) {
      pause(waits++);
      continue;
    }
    waits = 0;
    int mine = 0;
    if (lane == 0) {
      std::uint64_t expected = c;
      mine = blk64(ring->claimed).compare_exchange_strong(expected, c + k, memory_order_acq_rel);
    }
    if (__shfl_sync(~0u, mine, 0) == 0) continue;
    for (std::uint64_t j = lane; j < k; j += 32) {
      const std::uint64_t at = ring_step(c_at, j, v.ring_chunks);
      data[where[at]] = chunks[at];
    }
    if (lane == 0) kernel_crash_point("tx.drain");
    persist_each_at("tx.drain.chunks", lane < k ? (k - lane + 31) / 32 : 0, kChunkBytes,
                    [&](std::uint64_t m) {
                      return data + where[ring_step(c_at, lane + 32 * m, v.ring_chunks)];
                    });
    __syncwarp();
    if (lane == 0) {
      for (std::uint32_t round = 0; blk64(ring->persisted).load(memory_order_acquire) != c;
           ++round) {
        pause(round);
      }
      dev64(v.logs_state[log].persisted).fetch_add(k, memory_order_relaxed);
      kernel_crash_point("tx.publish");
      blk64(ring->persisted).store(c + k, memory_order_release);
      monitor_count(v, k * kChunkBytes);
    }
    __syncwarp();
  }
  occupancy.add_to(v);
  if (lane == 0) {
    dev64(v.logs_state[log].next).store(dev64(ring->stream.next).load(), memory_order_relaxed);
    dev64(v.logs_state[log].head_seen)
        .store(dev64(ring->stream.head_seen).load(memory_order_relaxed), memory_order_relaxed);
  }
}

}  // namespace gpm::detail::tx
