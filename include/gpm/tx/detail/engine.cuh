// The one transaction engine of gpm::tx: the device view of a heap, the metadata-based STM of the
// Helper Warps paper (TPDS'20, §4, Fig. 2) with redo logging at 32-bit-word granularity, the
// commit paths (volatile, direct, ring + helper warps, §4.1) and the helper warps' drain loop.
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
// records in sequence order reproduces the heap. The number and the record's space in its log
// stream are taken together under one order lock per log (direct) or per block ring (helpers),
// so within a log records lie in sequence order; this is what lets the host free log space in
// order without ever waiting on a record that cannot be written.
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
// out, and the log's head as last read from the pool (a lower bound of the real one).
struct log_state {
  std::uint32_t lock;
  std::uint32_t reserved0;
  std::uint64_t next;
  std::uint64_t head_seen;
};

// A block's persistence ring (helpers mode) at the start of its dynamic shared memory, followed
// by ring_chunks 16-byte chunks and ring_chunks 32-bit fill flags. A chunk at stream position p
// lives at index p % ring_chunks; its flag holds p + 1 (32 bits) once the chunk is written.
struct ring_control {
  std::uint32_t lock;          // order lock: sequence number and ring space are taken together
  std::uint32_t workers_done;  // workers of the block that returned from the body
  std::uint64_t reserved;      // next stream position to hand out
  std::uint64_t claimed;       // helpers: positions before it are being or have been copied
  std::uint64_t persisted;     // positions before it are persisted; their ring slots are free
  std::uint64_t head_seen;     // the log's head as last read from the pool
  std::uint64_t pad[3];
};
static_assert(sizeof(ring_control) % kChunkBytes == 0);

GPM_HOST_DEVICE constexpr std::uint64_t ring_bytes(std::uint32_t ring_chunks) {
  return sizeof(ring_control) + std::uint64_t{ring_chunks} * (kChunkBytes + 4);
}

struct heap_view {
  std::uint32_t* work = nullptr;  // the working copy in GPU memory: reads and writes go here
  std::uint64_t* orecs = nullptr;
  std::uint64_t orec_mask = 0;        // orec count - 1 (a power of two)
  std::uint64_t* status = nullptr;    // per thread slot: attempt << 2 | state
  std::uint64_t* counters = nullptr;  // per thread slot: commits, aborts
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
  // Set by tx_heap::launch for the blocks it runs (0 / null in kernels the caller launched):
  std::uint32_t workers_per_block = 0;
  std::uint32_t ring_chunks = 0;
  ring_control* ring = nullptr;  // this block's ring in shared memory
};
static_assert(std::is_trivially_copyable_v<heap_view>);

// The calling thread's status slot and its block's log.
__device__ inline std::uint64_t thread_slot(const heap_view& v) {
  if (v.workers_per_block == 0) return tile_index<1>();
  return std::uint64_t{blockIdx.x} * v.workers_per_block + threadIdx.x;
}
__device__ inline std::uint32_t log_of_block(const heap_view& v) { return blockIdx.x % v.logs; }

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

// The most chunks one reservation may take: what the block's ring and its log can hold.
GPM_HOST_DEVICE inline std::uint64_t record_room(const heap_view& v) {
  return v.ring != nullptr && v.ring_chunks < v.log_chunks ? v.ring_chunks : v.log_chunks;
}

// ---- one transaction ------------------------------------------------------------------------

enum class commit_step { retry, done, record };

// What one lane's attempt holds: the orecs it owns and its redo write set, both bounded.
// After a failed access (a conflict, a full set, a bad index, cancel()) the attempt is doomed:
// reads return 0, writes are ignored, and run() retries it or reports the failure.
template <unsigned MaxLocks, unsigned MaxWrites>
class transaction {
  static_assert(MaxLocks >= 1 && MaxWrites >= 1, "read and write sets hold at least one entry");

 public:
  __device__ transaction(const heap_view& v, std::uint64_t slot) : v_(v), slot_(slot) {}

  // The word's value as this transaction sees it (its own writes included).
  __device__ std::uint32_t read(std::uint64_t word) {
    if (!acquire_words(word, 1)) return 0;
    return value_of(static_cast<std::uint32_t>(word));
  }
  __device__ void write(std::uint64_t word, std::uint32_t value) {
    if (acquire_words(word, 1)) buffer(static_cast<std::uint32_t>(word), value);
  }
  // A value of sizeof(T) / 4 consecutive words starting at `word`, all locked before any is
  // read, so a 64-bit or larger value is never torn.
  template <class T>
  __device__ T read_as(std::uint64_t word) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0, "T must be whole words");
    std::uint32_t w[sizeof(T) / 4] = {};
    if (acquire_words(word, sizeof(T) / 4)) {
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
    dev64(v_.status[slot_]).store(status_word(attempt, kActive), memory_order_release);
  }

  // After the body: commits what needs no record, gives up or fails, or reports the chunks of
  // the record it needs (then the caller orders it and calls publish()).
  __device__ commit_step prepare(tx_result& r, std::uint64_t& chunks) {
    std::uint64_t expected = status_word(attempt_, kActive);
    if (state_ == conflict ||
        !dev64(v_.status[slot_])
             .compare_exchange_strong(expected, status_word(attempt_, kCommitting),
                                      memory_order_acq_rel)) {
      end(kAborted);
      ++v_.counters[2 * slot_ + 1];
      return commit_step::retry;
    }
    if (state_ == failed) return finish(r, failure_);
    if (writes_ == 0 || v_.mode == tx_mode::volatile_only) {
      apply();
      return finish(r, tx_status::committed);
    }
    chunks = record_chunks(writes_);
    if (chunks > record_room(v_)) return finish(r, tx_status::record_too_large);
    return commit_step::record;
  }

  // Writes the record at stream position `pos` of the block's log (directly and persisted, or
  // into the ring for the helpers), applies the write set to the working copy, releases.
  __device__ void publish(tx_result& r, std::uint64_t seq, std::uint64_t pos) {
    record_source rec{seq, writes_, words_, values_, 0};
    const std::uint32_t log = v_.ring != nullptr ? blockIdx.x : log_of_block(v_);
    rec.checksum = record_checksum(rec, writes_, record_seed(v_.salt, v_.epoch, log, pos));
    const std::uint64_t chunks = record_chunks(writes_);
    if (v_.ring != nullptr) {
      ulonglong2* ring = reinterpret_cast<ulonglong2*>(v_.ring + 1);
      std::uint32_t* flags = reinterpret_cast<std::uint32_t*>(ring + v_.ring_chunks);
      for (std::uint64_t j = 0; j < chunks; ++j) {
        const std::uint64_t at = (pos + j) % v_.ring_chunks;
        ring[at] = ulonglong2{rec.slot(2 * j), rec.slot(2 * j + 1)};
        blk32(flags[at]).store(static_cast<std::uint32_t>(pos + j + 1), memory_order_release);
      }
    } else {
      ulonglong2* data = v_.log_data + std::uint64_t{log} * v_.log_chunks;
      for (std::uint64_t j = 0; j < chunks; ++j) {
        data[(pos + j) % v_.log_chunks] = ulonglong2{rec.slot(2 * j), rec.slot(2 * j + 1)};
      }
      gpm::persist();
      atomic_ref<std::uint64_t, pool_scope>(v_.control[log].persisted).fetch_add(chunks);
    }
    apply();
    r.seq = seq;
    finish(r, tx_status::committed);
  }

 private:
  enum run_state : std::uint32_t { running, conflict, failed };

  __device__ void fail(tx_status s) {
    if (state_ != running) return;
    state_ = failed;
    failure_ = s;
  }
  __device__ bool acquire_words(std::uint64_t word, std::uint32_t n) {
    if (state_ != running) return false;
    if (word >= v_.words || n > v_.words - word) {
      fail(tx_status::out_of_range);
      return false;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!acquire_orec((word + i) & v_.orec_mask)) return false;
    }
    return true;
  }

  // Fig. 2's lock acquisition, with the COMMITTING rule.
  __device__ bool acquire_orec(std::uint64_t o) {
    for (std::uint32_t i = 0; i < locks_; ++i) {
      if (held_[i] == o) return true;
    }
    if (locks_ == MaxLocks) {
      fail(tx_status::read_set_full);
      return false;
    }
    dev64 orec(v_.orecs[o]);
    std::uint64_t cur = orec.load(memory_order_acquire);
    for (int tries = 0; tries < 4; ++tries) {
      if (cur != 0 && !owner_yields(cur)) break;
      if (orec.compare_exchange_strong(cur, mine_, memory_order_acq_rel)) {
        held_[locks_++] = o;
        return true;
      }
    }
    state_ = conflict;
    return false;
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

  __device__ void apply() const {
    for (std::uint32_t i = 0; i < writes_; ++i) {
      dev32(v_.work[words_[i]]).store(values_[i], memory_order_relaxed);
    }
  }
  // Releases the orecs this attempt still owns and leaves its status in `state`.
  __device__ void end(std::uint64_t state) {
    for (std::uint32_t i = 0; i < locks_; ++i) {
      std::uint64_t expected = mine_;
      dev64(v_.orecs[held_[i]]).compare_exchange_strong(expected, 0, memory_order_release);
    }
    locks_ = 0;
    dev64(v_.status[slot_]).store(status_word(attempt_, state), memory_order_release);
  }
  __device__ commit_step finish(tx_result& r, tx_status s) {
    end(kIdle);
    r.status = s;
    if (s == tx_status::committed) ++v_.counters[2 * slot_];
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
  std::uint64_t held_[MaxLocks];
  std::uint32_t words_[MaxWrites];
  std::uint32_t values_[MaxWrites];
};

// ---- ordering commits -----------------------------------------------------------------------

struct order {
  std::uint64_t seq = 0;  // the first of `count` consecutive sequence numbers
  std::uint64_t pos = 0;  // stream position of the first of `chunks` chunks
};

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

// Takes `count` sequence numbers and `chunks` chunks of the block's log stream together, under
// the order lock of the block's ring or of its log, once there is room for the chunks.
__device__ inline order reserve(const heap_view& v, std::uint32_t count, std::uint64_t chunks) {
  order o;
  if (ring_control* ring = v.ring) {
    lock_order(blk32(ring->lock));
    o.pos = blk64(ring->reserved).load(memory_order_relaxed);
    for (std::uint32_t round = 0;
         o.pos + chunks > blk64(ring->persisted).load(memory_order_acquire) + v.ring_chunks;
         ++round) {
      pause(round);
    }
    o.seq = dev64(*v.seq).fetch_add(count) + 1;
    blk64(ring->reserved).store(o.pos + chunks, memory_order_release);
    blk32(ring->lock).store(0, memory_order_release);
  } else {
    const std::uint32_t log = log_of_block(v);
    log_state& ls = v.logs_state[log];
    lock_order(dev32(ls.lock));
    o.pos = dev64(ls.next).load(memory_order_relaxed);
    std::uint64_t head = dev64(ls.head_seen).load(memory_order_relaxed);
    wait_for_log_space(v, log, head, o.pos + chunks);
    dev64(ls.head_seen).store(head, memory_order_relaxed);
    o.seq = dev64(*v.seq).fetch_add(count) + 1;
    dev64(ls.next).store(o.pos + chunks, memory_order_relaxed);
    dev32(ls.lock).store(0, memory_order_release);
  }
  return o;
}

// Sum of `x` over the lanes before the caller's (every lane calls).
template <class Tile>
__device__ inline std::uint64_t exclusive_sum(const Tile& tile, std::uint64_t x) {
  const unsigned rank = tile.thread_rank();
  std::uint64_t inclusive = x;
  for (unsigned o = 1; o < tile.size(); o *= 2) {
    const std::uint64_t below = tile.shfl(inclusive, rank >= o ? rank - o : rank);
    if (rank >= o) inclusive += below;
  }
  return inclusive - x;
}

// The tile's commit bookkeeping: the lanes whose transaction needs a record get consecutive
// sequence numbers and adjacent stream positions from one reservation by the first of them
// (warp-aggregated), or, when their records together exceed the ring, one reservation each.
template <class Tile, class Tx>
__device__ inline void order_and_publish(const heap_view& v, const Tile& tile, Tx& t, bool needs,
                                         std::uint64_t chunks, tx_result& r) {
  const unsigned mask = tile.ballot(needs);
  if (mask == 0) return;
  const unsigned rank = tile.thread_rank();
  const std::uint64_t before = exclusive_sum(tile, needs ? chunks : 0);
  const std::uint64_t total = tile.shfl(before + (needs ? chunks : 0), tile.size() - 1);
  order o;
  if (total <= record_room(v)) {
    const unsigned leader = __ffs(static_cast<int>(mask)) - 1;
    if (rank == leader) o = reserve(v, __popc(mask), total);
    o.seq = tile.shfl(o.seq, leader) + __popc(mask & ((1u << rank) - 1));
    o.pos = tile.shfl(o.pos, leader) + before;
  } else if (needs) {
    o = reserve(v, 1, chunks);
  }
  if (needs) t.publish(r, o.seq, o.pos);
}

// gpm::tx_ref::run: attempts until the transaction commits or fails; every lane of the tile
// calls it, each with its own transaction.
template <unsigned MaxLocks, unsigned MaxWrites, class Tile, class Body>
__device__ tx_result run(const heap_view& v, const Tile& tile, Body& body) {
  tx_result r;
  const std::uint64_t slot = thread_slot(v);
  bool pending = slot < v.max_threads;
  if (!pending) r.status = tx_status::too_many_threads;
  std::uint64_t attempt = pending ? dev64(v.status[slot]).load(memory_order_relaxed) >> 2 : 0;
  transaction<MaxLocks, MaxWrites> t(v, pending ? slot : 0);
  do {
    commit_step step = commit_step::done;
    std::uint64_t chunks = 0;
    if (pending) {
      t.begin(++attempt);
      ++r.attempts;
      body(t);
      step = t.prepare(r, chunks);
    }
    order_and_publish(v, tile, t, step == commit_step::record, chunks, r);
    if (step == commit_step::retry) {
      if (v.max_attempts != 0 && r.attempts >= v.max_attempts) {
        r.status = tx_status::too_many_aborts;
        pending = false;
      } else {
        pause(r.attempts);
      }
    } else {
      pending = false;
    }
  } while (tile.any(pending));
  return r;
}

// ---- helper warps (tx_heap::launch, helpers mode) -------------------------------------------

inline constexpr std::uint32_t kDrainBatch = 128;  // chunks a helper copies before one persist

// Called by every thread of the block before the workers start: the ring continues the block's
// log stream where the previous launch left it.
__device__ inline void init_ring(const heap_view& v) {
  ring_control* ring = v.ring;
  auto* flags =
      reinterpret_cast<std::uint32_t*>(reinterpret_cast<ulonglong2*>(ring + 1) + v.ring_chunks);
  const std::uint64_t start = v.logs_state[blockIdx.x].next;
  const std::uint64_t n = v.ring_chunks;
  if (threadIdx.x == 0) {
    *ring = ring_control{};
    ring->reserved = ring->claimed = ring->persisted = start;
    ring->head_seen = v.logs_state[blockIdx.x].head_seen;
  }
  // Flag i first serves position p = start + ((i - start) mod n); a value from the lap before it
  // never matches p + 1 or any later position of slot i.
  for (std::uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::uint64_t p = start + (i + n - start % n) % n;
    flags[i] = static_cast<std::uint32_t>(p + 1 - n);
  }
  __syncthreads();
}

// A helper warp: copies filled ring chunks, in stream order, into the block's log with coalesced
// 16-byte stores, persists each batch with one fence per lane, then publishes the log's persisted
// tail in order (two helpers may copy two batches at once) and frees the ring slots. Returns when
// the block's workers are done and everything they reserved is persisted.
__device__ inline void drain_ring(const heap_view& v) {
  ring_control* ring = v.ring;
  const ulonglong2* chunks = reinterpret_cast<const ulonglong2*>(ring + 1);
  const auto* flags = reinterpret_cast<const std::uint32_t*>(chunks + v.ring_chunks);
  const std::uint32_t log = blockIdx.x;
  ulonglong2* data = v.log_data + std::uint64_t{log} * v.log_chunks;
  const unsigned lane = threadIdx.x % 32;
  for (std::uint32_t idle = 0;;) {
    // Lane 0 reads what the other helper may change; the warp works on one view of it.
    std::uint64_t c = 0, head = 0;
    bool done = false;
    if (lane == 0) {
      done = blk32(ring->workers_done).load(memory_order_acquire) == v.workers_per_block;
      c = blk64(ring->claimed).load(memory_order_acquire);
      done = done && blk64(ring->reserved).load(memory_order_acquire) == c;
      head = blk64(ring->head_seen).load(memory_order_relaxed);
    }
    c = __shfl_sync(~0u, c, 0);
    head = __shfl_sync(~0u, head, 0);
    std::uint64_t k = 0;
    for (std::uint32_t base = 0; base < kDrainBatch; base += 32) {
      const std::uint64_t p = c + base + lane;
      const bool filled =
          blk32(const_cast<std::uint32_t&>(flags[p % v.ring_chunks])).load(memory_order_acquire) ==
          static_cast<std::uint32_t>(p + 1);
      const unsigned filled_lanes = __ballot_sync(~0u, filled);
      const unsigned run = filled_lanes == ~0u ? 32 : __ffs(static_cast<int>(~filled_lanes)) - 1;
      k += run;
      if (run < 32) break;
    }
    if (k != 0 && c + k > head + v.log_chunks) {
      if (lane == 0) {
        head = atomic_ref<std::uint64_t, thread_scope::system>(v.control[log].head)
                   .load(memory_order_acquire);
        blk64(ring->head_seen).store(head, memory_order_relaxed);
      }
      head = __shfl_sync(~0u, head, 0);
      k = head + v.log_chunks - c < k ? head + v.log_chunks - c : k;
    }
    if (k == 0) {
      if (__shfl_sync(~0u, static_cast<int>(done), 0) != 0) break;
      pause(idle++);
      continue;
    }
    idle = 0;
    int mine = 0;
    if (lane == 0) {
      std::uint64_t expected = c;
      mine = blk64(ring->claimed).compare_exchange_strong(expected, c + k, memory_order_acq_rel);
    }
    if (__shfl_sync(~0u, mine, 0) == 0) continue;
    for (std::uint64_t j = lane; j < k; j += 32) {
      data[(c + j) % v.log_chunks] = chunks[(c + j) % v.ring_chunks];
    }
    if (lane == 0) kernel_crash_point("tx.drain");
    gpm::persist();
    __syncwarp();
    if (lane == 0) {
      for (std::uint32_t round = 0; blk64(ring->persisted).load(memory_order_acquire) != c;
           ++round) {
        pause(round);
      }
      atomic_ref<std::uint64_t, pool_scope>(v.control[log].persisted)
          .store(c + k, memory_order_relaxed);
      gpm::persist();
      kernel_crash_point("tx.publish");
      blk64(ring->persisted).store(c + k, memory_order_release);
    }
    __syncwarp();
  }
  if (lane == 0) {
    dev64(v.logs_state[log].next).store(blk64(ring->reserved).load(), memory_order_relaxed);
    dev64(v.logs_state[log].head_seen)
        .store(blk64(ring->head_seen).load(memory_order_relaxed), memory_order_relaxed);
  }
}

}  // namespace gpm::detail::tx
