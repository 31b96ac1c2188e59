// The GPU cache engine of gpm::ooc, shared by every element type and tile size: the cache as
// kernels see it, the per-line directory and slot words, clock eviction, the call to the host
// I/O threads on a miss, and warp-level deduplication of misses. Public entry points are
// gpm::ooc::array (array.cuh); docs/out-of-core.md describes the protocol.
//
// directory[line] (one word per line of the mapping, GPU memory): kNoSlot, kPending (a thread is
// filling the line) or the slot holding it with the slot's generation when it was filled there
// (dir_entry: generation << 32 | slot). A direct map rather than a hash table: one word per line
// costs 8 bytes per 64 KiB-2 MiB of file (6 MiB for 48 GiB of 64 KiB lines), never probes, never
// needs tombstones, and a single CAS claims a line, so a line is fetched once however many
// threads miss on it.
// slot_word[slot]: tag (line + 1; 0 = empty) << 32 | kBusy | kAccessed | reference count. A thread
// holds a line by a CAS that raises the count of a non-busy slot carrying the line's tag; clock
// eviction claims a slot by a CAS from count 0, not busy, to busy, skipping slots whose accessed
// bit is set (clearing it: a second chance).
// slot_gen[slot]: a generation, odd while a fill owns the slot (from its claim until the slot
// holds its new line or is given up), even otherwise; every fill raises it by 2, so a slot and a
// generation name one content of one slot. Element loads read without a reference, as a seqlock
// reader does (peek, peek_valid): under references, every warp of a GPU loading from one line
// CASed the same slot word for each load (lavaMD on an H100: 0.01x a hand-written pipeline with
// every line already in the cache). The directory entry carries the generation so that such a
// load is three dependent reads (entry, data, generation), not five (entry, generation, slot
// word, data, generation): lavaMD's element loads are chains of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/ooc/detail/protocol.hpp>
#include <gpm/ooc/status.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>

namespace gpm::detail::ooc {

using gpm::ooc::mode;
using gpm::ooc::status;

// Directory entries that name no slot (a slot index is below kMaxSlots).
inline constexpr std::uint64_t kNoSlot = ~0ull;
inline constexpr std::uint64_t kPending = ~0ull - 1;
inline constexpr std::uint32_t kMaxSlots = 0xfffffffeu;
inline constexpr std::uint64_t kBusy = 1ull << 31;
inline constexpr std::uint64_t kAccessed = 1ull << 30;
inline constexpr std::uint64_t kRefMask = kAccessed - 1;

// dirty[slot]: what of the line must go back when it leaves the GPU.
inline constexpr std::uint32_t kClean = 0;
inline constexpr std::uint32_t kDirtyMasked = 1;  // mode::write: the bytes named in its mask
inline constexpr std::uint32_t kDirtyWhole = 2;   // the whole line

// Telemetry counters, sharded by block so that concurrent warps rarely add to the same word.
enum counter : std::uint32_t { kHits, kMisses, kWaitCycles, kIoErrors, kCounters };
inline constexpr std::uint32_t kCounterShards = 32;
inline constexpr std::uint32_t kShardStride = 16;  // 128 bytes per shard

struct cache_view {
  std::byte* lines = nullptr;          // capacity * line bytes
  std::uint64_t* slot_word = nullptr;  // per slot
  std::uint32_t* slot_gen = nullptr;   // per slot
  std::uint32_t* dirty = nullptr;      // per slot
  std::uint32_t* mask = nullptr;       // mode::write: mask_words per slot
  std::uint64_t* directory = nullptr;  // per line of the mapping
  std::uint32_t* clock_hand = nullptr;
  unsigned long long* counters = nullptr;  // kCounterShards * kShardStride
  queue_view queue;
  // Lines kernels touch() go to a ring in pinned host memory that only the GPU writes: entry
  // pos % hint_slots holds (pos + 1) mod 2^32 << 32 | line, so host threads tell new entries
  // from old ones and from entries overwritten before they read them (a lost hint costs nothing).
  std::uint64_t* hints = nullptr;           // host memory, GPU address
  unsigned long long* hint_next = nullptr;  // GPU memory: entries posted so far
  // GPU memory, hint_slots words: the last hint posted per line hash, (line + 1) << 32 | the
  // global time's low 32 bits in ns, so that a line touched by many warps at once is posted once.
  unsigned long long* hint_recent = nullptr;
  std::uint32_t hint_slots = 0;
  std::uint64_t bytes = 0;  // the mapping's size
  std::uint64_t line_count = 0;
  std::uint32_t line_shift = 0;  // log2 of the line size
  std::uint32_t capacity = 0;    // slots
  std::uint32_t mask_words = 0;
  mode mapping_mode = mode::read_write;
  // Every line of the mapping was loaded at map time and line l stays in slot l for good
  // (docs/out-of-core.md, "Resident mappings"): accesses go straight to lines + byte offset, with
  // no directory lookup, reference count or clock; stores still mark the slot dirty.
  bool resident = false;
};

GPM_HOST_DEVICE inline std::uint64_t tag_of(std::uint64_t word) { return word >> 32; }

// A directory entry naming `slot`, filled at generation `gen`, and its parts.
GPM_HOST_DEVICE inline std::uint64_t dir_entry(std::uint32_t slot, std::uint32_t gen) {
  return static_cast<std::uint64_t>(gen) << 32 | slot;
}
GPM_HOST_DEVICE inline bool names_slot(std::uint64_t entry) { return entry < kPending; }
GPM_HOST_DEVICE inline std::uint32_t slot_of(std::uint64_t entry) {
  return static_cast<std::uint32_t>(entry);
}
GPM_HOST_DEVICE inline std::uint32_t gen_of(std::uint64_t entry) {
  return static_cast<std::uint32_t>(entry >> 32);
}

__device__ inline void count(const cache_view& v, counter c, unsigned long long n) {
  unsigned long long& word = v.counters[(blockIdx.x % kCounterShards) * kShardStride + c];
  atomic_ref<unsigned long long>(word).fetch_add(n, memory_order_relaxed);
}

// Sleeps between polls of a word that another agent will change, doubling up to ~2 us: fewer
// PCIe reads on a GPU, and on the host emulator a yield to the block's other threads.
__device__ inline void backoff(unsigned& ns) {
  __nanosleep(ns);
  if (ns < 2048) ns *= 2;
}

// Asks the host I/O threads to evict and/or fill GPU cache slot `slot` and waits for the answer
// (a result_flag set).
__device__ inline std::uint32_t call_host(const queue_view& q, std::uint32_t slot,
                                          std::uint32_t flags, std::uint64_t evict_line,
                                          std::uint64_t fill_line) {
  auto k = static_cast<std::uint32_t>(fill_line % q.slots);
  unsigned ns = 32;
  for (std::uint32_t tried = 1;; ++tried) {
    std::uint32_t expected = 0;
    if (atomic_ref<std::uint32_t>(q.owner[k])
            .compare_exchange_strong(expected, 1, memory_order_acquire)) {
      break;
    }
    k = (k + 1) % q.slots;
    if (tried % q.slots == 0) backoff(ns);  // every slot is in use
  }
  const std::uint64_t seq = q.next_seq[k] + 1;
  q.next_seq[k] = seq;
  request& r = q.requests[k];
  r.evict_line = evict_line;
  r.fill_line = fill_line;
  r.slot = slot;
  r.flags = flags;
  atomic_ref<std::uint64_t, thread_scope::system>(r.seq).store(seq, memory_order_release);
  atomic_ref<std::uint64_t, thread_scope::system> done(q.responses[k].seq);
  ns = 32;
  while (done.load(memory_order_acquire) != seq) backoff(ns);
  const std::uint32_t result =
      atomic_ref<std::uint32_t, thread_scope::system>(q.responses[k].result)
          .load(memory_order_relaxed);
  atomic_ref<std::uint32_t>(q.owner[k]).store(0, memory_order_release);
  return result;
}

// Claims a slot for reuse with the clock: returns it busy, unreferenced, with its old tag.
__device__ inline std::uint32_t claim_victim(const cache_view& v) {
  unsigned ns = 32;
  for (std::uint64_t scanned = 1;; ++scanned) {
    const std::uint32_t s =
        atomic_ref<std::uint32_t>(*v.clock_hand).fetch_add(1, memory_order_relaxed) % v.capacity;
    atomic_ref<std::uint64_t> word(v.slot_word[s]);
    std::uint64_t w = word.load(memory_order_relaxed);
    if ((w & (kBusy | kRefMask)) == 0) {
      if ((w & kAccessed) != 0) {
        word.compare_exchange_strong(w, w & ~kAccessed, memory_order_relaxed);
      } else if (word.compare_exchange_strong(w, w | kBusy, memory_order_acquire)) {
        return s;
      }
    }
    if (scanned % (2ull * v.capacity) == 0) backoff(ns);  // every line is held or being filled
  }
}

// The caller has set directory[line] to kPending: finds a slot, has the host write its old line
// back if dirty and fill it with `line`, and publishes it holding one reference for the caller.
__device__ inline status fill(const cache_view& v, std::uint64_t line, std::uint32_t& slot) {
  const std::uint32_t s = claim_victim(v);
  atomic_ref<std::uint32_t> gen(v.slot_gen[s]);
  // Odd before the host may overwrite the slot (the request below is a release): a reader that
  // sees the new bytes then sees the generation changed.
  const std::uint32_t settled = gen.fetch_add(1, memory_order_relaxed) + 2;
  atomic_ref<std::uint64_t> word(v.slot_word[s]);
  atomic_ref<std::uint64_t> dir(v.directory[line]);
  atomic_ref<std::uint32_t> dirty(v.dirty[s]);
  const std::uint64_t w = word.load(memory_order_relaxed);
  const std::uint64_t old = tag_of(w) == 0 ? kNoLine : tag_of(w) - 1;
  const std::uint32_t d = dirty.load(memory_order_relaxed);
  std::uint32_t flags = v.mapping_mode == mode::write ? kZero : kFetch;
  if (old != kNoLine && d != kClean) flags |= kEvict | (d == kDirtyWhole ? kEvictWhole : 0u);
  kernel_crash_point("ooc.fill");  // a miss in flight, maybe a dirty line leaving the GPU
  const std::uint32_t result = call_host(v.queue, s, flags, old, line);
  gen.fetch_add(1, memory_order_release);  // even: the slot's bytes are settled
  if ((flags & kEvict) != 0 && (result & kEvicted) == 0) {
    // The old line stays, dirty, its bytes untouched, at the new generation: its entry says so,
    // or loads through it would never validate.
    atomic_ref<std::uint64_t>(v.directory[old]).store(dir_entry(s, settled), memory_order_release);
    word.store(w & ~kBusy, memory_order_release);
    dir.store(kNoSlot, memory_order_release);
    return status::io_error;
  }
  if (old != kNoLine)
    atomic_ref<std::uint64_t>(v.directory[old]).store(kNoSlot, memory_order_relaxed);
  dirty.store(kClean, memory_order_relaxed);
  if ((result & kFilled) == 0) {
    word.store(0, memory_order_release);
    dir.store(kNoSlot, memory_order_release);
    return status::io_error;
  }
  word.store((line + 1) << 32 | kAccessed | 1, memory_order_release);
  dir.store(dir_entry(s, settled), memory_order_release);
  slot = s;
  return status::ok;
}

// One thread takes a reference on `line`, filling it on a miss; `slot` holds it on ok. With `held`
// non-null, a thread that finds the line filled (by another) takes no reference: it returns ok
// with *held false, and the caller reads the line through peek(). A line that thousands of warps
// missed at once (every warp of a launch on one line) is then filled once and read without an
// atomic each on its slot word, where their references serialized (~0.9 ms per such line on an
// H200). *held is true when it holds a reference (it filled the line, or took one).
__device__ inline status acquire_line(const cache_view& v, std::uint64_t line, std::uint32_t& slot,
                                      bool* held = nullptr) {
  if (held != nullptr) *held = true;
  atomic_ref<std::uint64_t> dir(v.directory[line]);
  long long waiting_since = 0;
  unsigned ns = 32;
  auto account_wait = [&] {
    if (waiting_since != 0)
      count(v, kWaitCycles, static_cast<unsigned long long>(clock64() - waiting_since));
  };
  for (;;) {
    const std::uint64_t e = dir.load(memory_order_acquire);
    if (e == kNoSlot) {
      std::uint64_t expected = kNoSlot;
      if (dir.compare_exchange_strong(expected, kPending, memory_order_acq_rel)) {
        if (waiting_since == 0) waiting_since = clock64();
        const status st = fill(v, line, slot);
        account_wait();
        count(v, st == status::ok ? kMisses : kIoErrors, 1);
        return st;
      }
      continue;
    }
    if (e != kPending) {
      const std::uint32_t d = slot_of(e);
      atomic_ref<std::uint64_t> word(v.slot_word[d]);
      std::uint64_t w = word.load(memory_order_relaxed);
      if (tag_of(w) == line + 1 && (w & kBusy) == 0) {
        if (held != nullptr) {
          *held = false;
          slot = d;
          account_wait();
          count(v, kHits, 1);
          return status::ok;
        }
        if (word.compare_exchange_weak(w, (w + 1) | kAccessed, memory_order_acquire)) {
          slot = d;
          account_wait();
          count(v, kHits, 1);
          return status::ok;
        }
        continue;
      }
    }
    if (waiting_since == 0) waiting_since = clock64();
    backoff(ns);  // the line is being filled or evicted
  }
}

// Element loads' fast path, taking no reference: the slot that held `line` when the directory
// was read and the generation it was filled at, or false when the line is not in the GPU cache
// or is being filled (then take a reference: acquire_line). A value read from the slot is good if
// peek_valid() then finds the slot at that generation: every fill raises it (odd at its claim,
// before the host may overwrite the slot), so the slot still held the line when it was read. The
// entry is read with acquire: the line's bytes were settled before it was published.
__device__ inline bool peek(const cache_view& v, std::uint64_t line, std::uint32_t& slot,
                            std::uint32_t& gen) {
  const std::uint64_t e = atomic_ref<std::uint64_t>(v.directory[line]).load(memory_order_acquire);
  if (!names_slot(e)) return false;
  slot = slot_of(e);
  gen = gen_of(e);
  return true;
}

// After the read from `slot`: whether its generation is still `gen`. The accessed bit is set as
// a hit would set it, written only when clear, so that the clock gives lines in use their second
// chance; its word is read beside the generation, after the data, so it adds no step to the
// load's chain of dependent reads.
__device__ inline bool peek_valid(const cache_view& v, std::uint32_t slot, std::uint32_t gen) {
  atomic_thread_fence<thread_scope::device>(memory_order_acquire);
  atomic_ref<std::uint64_t> word(v.slot_word[slot]);
  const std::uint64_t w = word.load(memory_order_relaxed);
  if (atomic_ref<std::uint32_t>(v.slot_gen[slot]).load(memory_order_relaxed) != gen) return false;
  if ((w & kAccessed) == 0) word.fetch_or(kAccessed, memory_order_relaxed);
  return true;
}

__device__ inline void release_line(const cache_view& v, std::uint32_t slot) {
  atomic_ref<std::uint64_t>(v.slot_word[slot]).fetch_sub(1, memory_order_release);
}

__device__ inline void mark_dirty(const cache_view& v, std::uint32_t slot, std::uint32_t kind) {
  atomic_ref<std::uint32_t> d(v.dirty[slot]);
  if (d.load(memory_order_relaxed) < kind) d.fetch_max(kind, memory_order_relaxed);
}

// mode::write: records that bytes [first, first + bytes) of the slot's line were written.
__device__ inline void mark_written(const cache_view& v, std::uint32_t slot, std::uint32_t first,
                                    std::uint32_t bytes) {
  std::uint32_t* row = v.mask + static_cast<std::size_t>(slot) * v.mask_words;
  std::uint32_t bit = first / kMaskGranule;
  const std::uint32_t end = (first + bytes + kMaskGranule - 1) / kMaskGranule;
  while (bit < end) {
    const std::uint32_t lo = bit % 32;
    const std::uint32_t n = end - bit < 32 - lo ? end - bit : 32 - lo;
    const std::uint32_t bits = (n == 32 ? ~0u : (1u << n) - 1) << lo;
    atomic_ref<std::uint32_t>(row[bit / 32]).fetch_or(bits, memory_order_relaxed);
    bit += n;
  }
}

// mark_written for every lane of the warp that stores now (any subset of it, possibly into
// different slots and mappings): lanes whose bytes lie in one mask word of one slot OR their bits
// together and the lowest of them applies them, so a warp storing 32 consecutive floats (the 128
// bytes one mask word covers) makes one atomic instead of 32 on one word. The groups are served
// one after another with collectives over all the lanes (per-group collectives would leave a
// group's lanes in one while the others had moved on to the caller's __syncwarp).
__device__ inline void mark_written_warp(const cache_view& v, std::uint32_t slot,
                                         std::uint32_t first, std::uint32_t bytes) {
  const std::uint32_t g0 = first / kMaskGranule;
  const std::uint32_t g1 = (first + bytes - 1) / kMaskGranule;
  const bool one_word = g0 / 32 == g1 / 32;
  const std::uint32_t n = g1 - g0 + 1;
  const unsigned mine = one_word ? (n == 32 ? ~0u : (1u << n) - 1) << (g0 % 32) : 0u;
  const auto mapping = reinterpret_cast<unsigned long long>(v.mask);
  // Lanes whose bytes span two words go alone (a key no word has: slot kNoSlot).
  const unsigned long long key =
      one_word ? static_cast<unsigned long long>(slot) << 32 | g0 / 32 : ~0ull - lane_id();
  const unsigned active = __activemask();
  for (unsigned pending = active; pending != 0;) {
    const int leader = __ffs(static_cast<int>(pending)) - 1;
    const unsigned long long leader_key = __shfl_sync(active, key, leader);
    const unsigned long long leader_mapping = __shfl_sync(active, mapping, leader);
    const bool member = key == leader_key && mapping == leader_mapping;
    const unsigned members = __ballot_sync(active, member);
    const unsigned bits = __reduce_or_sync(active, member ? mine : 0u);
    if (lane_id() == static_cast<unsigned>(leader)) {
      if (!one_word) {
        mark_written(v, slot, first, bytes);
      } else {
        atomic_ref<std::uint32_t> word(
            v.mask[static_cast<std::size_t>(slot) * v.mask_words + g0 / 32]);
        if ((word.load(memory_order_relaxed) & bits) != bits) {
          word.fetch_or(bits, memory_order_relaxed);
        }
      }
    }
    pending &= ~members;
  }
}

// What the dirty word must become when a line is stored to under `m`.
GPM_HOST_DEVICE inline std::uint32_t dirty_kind(mode m) {
  return m == mode::write ? kDirtyMasked : kDirtyWhole;
}

// The lanes of the calling warp's active ones that are on `line` of the same mapping (lanes of
// different mappings run the same code).
__device__ inline unsigned same_line_peers(const cache_view& v, std::uint64_t line) {
  const unsigned active = __activemask();
  const unsigned same_cache =
      __match_any_sync(active, reinterpret_cast<unsigned long long>(v.directory));
  return __match_any_sync(same_cache, static_cast<unsigned long long>(line));
}

// touch(): the lowest lane of each group on one line posts it to the hint ring unless it is in
// the GPU cache or being filled already. Never waits.
__device__ inline void post_hint(const cache_view& v, std::uint64_t line) {
  const unsigned peers = same_line_peers(v, line);
  if (lane_id() != static_cast<unsigned>(__ffs(static_cast<int>(peers)) - 1)) return;
  if (atomic_ref<std::uint64_t>(v.directory[line]).load(memory_order_relaxed) != kNoSlot) return;
  // Every warp of a grid touching its elements hints the same few lines: posted each time, their
  // hints would lap the ring before the host reads it and only the last lines touched would be
  // read ahead. A line hinted in the last kHintRepeatNs is not hinted again (two warps racing
  // here may both post: a duplicate costs one lookup on the host).
  constexpr std::uint32_t kHintRepeatNs = 200'000;
  const auto now = static_cast<std::uint32_t>(global_time_ns());
  atomic_ref<unsigned long long> recent(v.hint_recent[line % v.hint_slots]);
  const unsigned long long last = recent.load(memory_order_relaxed);
  if (last >> 32 == line + 1 && now - static_cast<std::uint32_t>(last) < kHintRepeatNs) return;
  recent.store(static_cast<unsigned long long>(line + 1) << 32 | now, memory_order_relaxed);
  const unsigned long long pos =
      atomic_ref<unsigned long long>(*v.hint_next).fetch_add(1, memory_order_relaxed);
  const std::uint64_t word = ((pos + 1) & 0xffffffffull) << 32 | line;
  atomic_ref<std::uint64_t, thread_scope::system>(v.hints[pos % v.hint_slots])
      .store(word, memory_order_release);
}

// A warp's lanes that access the same line, and the reference their leader took for them.
struct warp_hold {
  std::uint32_t slot;
  unsigned peers;
  unsigned leader;
  status st;
  bool held;  // the leader holds a reference (warp_release gives it back)
};

// Called by every lane that accesses `line` now (any subset of the warp, possibly through
// different mappings: all run this same code): lanes on the same line of the same mapping are
// grouped with __match_any_sync and only the group's lowest lane takes the reference (and fills the
// line on a miss), so a warp asks for each line once. If any lane of the group `stores`, the leader
// marks the line dirty while it holds it. `loads_peek`: loads only, which may find the line
// filled by another warp and then hold nothing (acquire_line's `held`; they read it via peek()).
__device__ inline warp_hold warp_acquire(const cache_view& v, std::uint64_t line, bool stores,
                                         bool loads_peek = false) {
  const unsigned peers = same_line_peers(v, line);
  const bool any_stores = __ballot_sync(peers, stores) != 0;
  const unsigned leader = static_cast<unsigned>(__ffs(static_cast<int>(peers)) - 1);
  std::uint32_t slot = 0;
  std::uint32_t st = 0;
  bool held = true;
  if (lane_id() == leader) {
    st = static_cast<std::uint32_t>(
        acquire_line(v, line, slot, loads_peek && !any_stores ? &held : nullptr));
    if (st == 0 && any_stores) mark_dirty(v, slot, dirty_kind(v.mapping_mode));
  }
  slot = __shfl_sync(peers, slot, static_cast<int>(leader));
  st = __shfl_sync(peers, st, static_cast<int>(leader));
  held = __shfl_sync(peers, held ? 1 : 0, static_cast<int>(leader)) != 0;
  return {slot, peers, leader, static_cast<status>(st), held && st == 0};
}

// Every lane of the group calls this after its access; `stored`: the lane wrote to the line.
__device__ inline void warp_release(const cache_view& v, const warp_hold& h, bool stored) {
  if (stored) atomic_thread_fence<thread_scope::device>(memory_order_release);
  __syncwarp(h.peers);
  if (lane_id() == h.leader && h.held) release_line(v, h.slot);
}

}  // namespace gpm::detail::ooc
