// The one probing engine of GPHash, shared by every key size and cooperative-group size: the
// table view, slot access (pool or bucket cache), the one-shot probe of all candidate slots, and
// the lock-free, log-free insert / update / find / erase protocol (FAST'25 §3.2.3). Public entry
// points are gpm::gphash_ref (gphash_ref.cuh); nothing here stores a pointer into the pool.
//
// Slot: word 0 = fingerprint word (doubles as state: EMPTY = 0, INSERTING = ~0), word 1 = value
// offset (pool offset of a value cell), words 2..5 = the key (32-byte keys only). 8-byte keys are
// their own fingerprint word (key + 1), so 2^64-2 and 2^64-1 are reserved. A bucket stores its
// slots' words grouped by word number (slot_ref), so a probe reads a bucket's fingerprint words
// as one contiguous run and the other words only of a slot whose fingerprint matches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

namespace gpm::detail::hash {

inline constexpr std::uint64_t kEmpty = 0;
inline constexpr std::uint64_t kInserting = ~0ull;
inline constexpr std::uint32_t kMaxLevels = 5;     // level_count (<= 4) + a level being drained
inline constexpr std::uint32_t kMaxSegments = 48;  // value-area segments (one per resize)
inline constexpr std::uint64_t kNone = ~0ull;

enum class insert_mode { insert, upsert, rehash };

// BktCache (FAST'25 §3.3) as kernels see it; `map` is null when the cache is off.
// map[gid] (F): 0 = not cached, else (y + 1) << 1 | ready, y the cache bucket. owner[y] (G).
// seq[y * K + s]: a seqlock per cached slot; writers hold it odd while copying from the pool.
// refs[y]: writers inside bucket y; the loader waits for 0 before reusing y.
// values[(y * K + s) * value_bytes / 8 ...]: the value cache, the value of cached slot s (when
// published), copied with the slot under its seqlock; null when values are not cached.
struct cache_view {
  std::uint32_t* map = nullptr;
  std::uint64_t* owner = nullptr;
  std::uint32_t* seq = nullptr;
  std::uint32_t* refs = nullptr;
  std::uint64_t* slots = nullptr;   // cached buckets, slot_bytes per slot
  std::uint64_t* values = nullptr;  // the value cache, value_bytes per cached slot
  std::uint32_t* freq = nullptr;    // LFU: accesses per bucket
  std::uint32_t* stamp = nullptr;   // LRU: batch of the last access per bucket
  // [0] slot reads from cache, [1] from the pool; [2] finds' values copied from the value cache,
  // [3] finds whose valid copy came from the cache but whose value was read from the pool
  // (a writer changed the slot meanwhile).
  unsigned long long* counters = nullptr;
  std::uint32_t now = 0;
  std::uint32_t bottom = 0;  // level of global bucket id 0
  std::uint32_t top = 0;
  std::uint64_t buckets = 0;
  std::uint64_t capacity = 0;  // cache buckets
};

struct table_view {
  char* base = nullptr;                         // the pool in this address space
  std::uint64_t level_offset[kMaxLevels] = {};  // [d]: level top - d
  std::uint32_t top = 0;
  std::uint32_t levels = 0;  // levels probed: top .. top - levels + 1
  std::uint32_t hash_count = 0;
  std::uint32_t slots = 0;       // K
  std::uint32_t slot_words = 0;  // 2 (8-byte keys) or 6 (32-byte keys)
  std::uint32_t value_bytes = 0;
  // A cell is [key record (variable-length keys: 8-byte length + key, key_area bytes)][value].
  std::uint32_t key_area = 0;
  std::uint32_t cell_bytes = 0;
  std::uint32_t max_key_bytes = 0;
  std::uint64_t seed = 0;
  // Value area: cells of value_bytes in segments; a volatile bitmap (1 = taken) rebuilt from the
  // published slots by recovery, so allocation needs no persistent state to be crash-safe.
  std::uint64_t* bitmap = nullptr;
  std::uint64_t bitmap_words = 0;
  std::uint32_t segments = 0;
  std::uint64_t seg_offset[kMaxSegments] = {};
  std::uint64_t seg_first[kMaxSegments + 1] = {};  // first cell of each segment; [segments]=cells
  // Cells freed by update/erase: a bit per cell, like `bitmap`, folded into it by reclaim()
  // after the batch, so no reader of an old value offset sees its cell reused. Never overflows.
  std::uint64_t* retired = nullptr;
  // Allocation cursors (new_value), cursor_mask + 1 bitmap word indices in GPU memory: block b
  // allocates from cursors[b & cursor_mask] onwards. Hints only: a stale one costs a longer scan.
  std::uint64_t* cursors = nullptr;
  std::uint32_t cursor_mask = 0;
  // Volatile locks (GPU memory), a word per hash of what they guard (lock_word), lock_mask + 1
  // words: an insert holds its key's from its probe to its publication, so that concurrent
  // inserts of one key leave one copy; displacement holds the bucket's it moves an item out of.
  std::uint32_t* locks = nullptr;
  std::uint64_t lock_mask = 0;
  // The fingerprint mirror (gphash_options::fingerprint_mirror): [d] for level top - d, a copy of
  // each slot's fingerprint word in GPU memory, K words per bucket, buckets in order; all null
  // when it is off, and in the views of resize and recovery, which rebuild it from the pool.
  std::uint64_t* mirror[kMaxLevels] = {};
  // Combined updates (gphash_options::combine_updates): [d] for level top - d, a generation word
  // per slot in GPU memory, laid out like the mirror: odd while an update of the slot holds it
  // (combine_update); all null when off, and in the views of resize and recovery.
  std::uint32_t* update_gen[kMaxLevels] = {};
  // false only for a volatile copy of the table in GPU memory (the benchmarks' ceiling):
  // operations then skip every persist.
  bool persistent = true;
  cache_view cache;
  // The armed crash point for GPU threads (crash tests; empty otherwise).
  kernel_crash_ref crash;
};

// FAST'25's persist at the persist site `site` (the sites are listed in src/hash/gphash.cu),
// unless the view is a volatile copy. On a GPU it is __threadfence_system(), which makes all of
// the calling thread's earlier pool stores durable; [p, p + len) names the lines the protocol
// relies on, which is what the crash-image checker makes durable (docs/crash-checking.md). The
// range is not computed on a GPU, where it is unused.
__device__ inline void persist_at(const table_view& v, const char* site, const void* p,
                                  std::size_t len) {
  if (v.persistent) gpm::persist_at(site, p, len);
}

// gpm::persist_later_at and persist_named_at, unless the view is a volatile copy: a thread that
// makes ranges of several sites durable with one fence after the last (on a GPU the fence covers
// all of the thread's stores; on the emulator each range is persisted as it is named).
__device__ inline void persist_later_at(const table_view& v, const char* site, const void* p,
                                        std::size_t len) {
  if (v.persistent) gpm::persist_later_at(site, p, len);
}
__device__ inline void persist_named_at(const table_view& v, const char* site) {
  if (v.persistent) gpm::persist_named_at(site);
}

// ---- slot layout ---------------------------------------------------------------------------

// One slot's words. A bucket of K slots holds the K fingerprint words (word 0 of each slot), then
// the K value offsets (word 1), then, for 32-byte keys, the K keys (words 2..5) one after
// another. The lanes of a probe thus read a bucket's fingerprint words as one run (64 B for
// K = 8, a sixth of a 32-byte-key bucket), and a matching slot's value offset and whole key in
// one more access each. Cached buckets use the same layout.
struct slot_ref {
  std::uint64_t* bucket = nullptr;  // the bucket's first word
  std::uint32_t slot = 0;
  std::uint32_t slots = 0;  // K
  GPM_HOST_DEVICE std::uint64_t& operator[](std::uint32_t w) const {
    return w < 2 ? bucket[w * slots + slot] : bucket[2 * slots + 4 * slot + (w - 2)];
  }
};

// A slot's words as read: `value` and `key` only when the fingerprint word matched (load_slot).
struct slot_image {
  std::uint64_t word = kEmpty;
  std::uint64_t value = 0;
  std::uint64_t key[4] = {};
};

// Where a slot read came from: a cached slot, and its seqlock and mapping as the read found them
// (slot == kNone: the pool). A find copies the value of a cached valid copy from the value cache
// only while both words still hold these, so the value belongs to the very version of the cached
// slot whose value offset the probe found (copy_cached_value).
struct cache_ticket {
  std::uint64_t slot = kNone;  // y * K + s
  std::uint64_t bucket = 0;    // the global id x of the table bucket (F[x])
  std::uint32_t seq = 0;
  std::uint32_t map = 0;
};

// ---- keys ----------------------------------------------------------------------------------

// Fingerprint word of a hashed key, moved off the two reserved state values.
GPM_HOST_DEVICE inline std::uint64_t fingerprint(std::uint64_t h) {
  std::uint64_t f = mix64(h ^ 0x66696e6765727072ull);
  if (f == kEmpty) f = 1;
  if (f == kInserting) f = kInserting - 1;
  return f;
}

// What differs between key kinds; everything else is the one engine below.
//   valid     whether the key can be stored
//   hash      64-bit hash; word: the slot's fingerprint word
//   same_key  whether a slot whose fingerprint word matched holds the key
//   store_key writes in-place key words (32-byte keys); write_record: the key record in the
//             value cell (variable-length keys)
//   key_at    the key of a published slot, as the device sees it
template <class Key>
struct key_ops;

template <>
struct key_ops<std::uint64_t> {
  GPM_HOST_DEVICE static bool valid(const table_view&, std::uint64_t k) { return k < ~0ull - 1; }
  GPM_HOST_DEVICE static std::uint64_t hash(std::uint64_t k, std::uint64_t seed) {
    return mix64(k ^ seed);
  }
  GPM_HOST_DEVICE static std::uint64_t word(std::uint64_t k, std::uint64_t) { return k + 1; }
  template <class Image>
  __device__ static bool same_key(const table_view&, const Image&, std::uint64_t) {
    return true;  // the fingerprint word is the key
  }
  __device__ static void store_key(const slot_ref&, std::uint64_t) {}
  template <class Tile>
  __device__ static void write_record(const table_view&, const Tile&, char*, std::uint64_t) {}
  GPM_HOST_DEVICE static std::uint64_t key_at(const table_view&, const slot_image& img) {
    return img.word - 1;
  }
};

template <>
struct key_ops<key32> {
  GPM_HOST_DEVICE static bool valid(const table_view&, const key32&) { return true; }
  GPM_HOST_DEVICE static std::uint64_t hash(const key32& k, std::uint64_t seed) {
    std::uint64_t h = seed;
    for (int i = 0; i < 4; ++i) h = mix64(h ^ k.words[i]);
    return h;
  }
  GPM_HOST_DEVICE static std::uint64_t word(const key32&, std::uint64_t h) {
    return fingerprint(h);
  }
  template <class Image>
  __device__ static bool same_key(const table_view&, const Image& img, const key32& k) {
    return img.key[0] == k.words[0] && img.key[1] == k.words[1] && img.key[2] == k.words[2] &&
           img.key[3] == k.words[3];
  }
  __device__ static void store_key(const slot_ref& slot, const key32& k) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      atomic_ref<std::uint64_t, pool_scope>(slot[2 + i]).store(k.words[i], memory_order_relaxed);
    }
  }
  template <class Tile>
  __device__ static void write_record(const table_view&, const Tile&, char*, const key32&) {}
  GPM_HOST_DEVICE static key32 key_at(const table_view&, const slot_image& img) {
    return key32{{img.key[0], img.key[1], img.key[2], img.key[3]}};
  }
};

// Variable-length keys live in the value cell's key record [length][bytes], written with the
// value before the slot is claimed; the slot holds the fingerprint and the cell's offset.
template <>
struct key_ops<varkey> {
  GPM_HOST_DEVICE static bool valid(const table_view& v, const varkey& k) {
    return k.bytes <= v.max_key_bytes && (k.bytes == 0 || k.data != nullptr);
  }
  GPM_HOST_DEVICE static std::uint64_t hash(const varkey& k, std::uint64_t seed) {
    const auto* p = static_cast<const unsigned char*>(k.data);
    std::uint64_t h = mix64(seed ^ k.bytes);
    std::uint64_t word = 0;
    for (std::uint32_t i = 0; i < k.bytes; ++i) {
      word = word << 8 | p[i];
      if (i % 8 == 7) {
        h = mix64(h ^ word);
        word = 0;
      }
    }
    return mix64(h ^ word);
  }
  GPM_HOST_DEVICE static std::uint64_t word(const varkey&, std::uint64_t h) {
    return fingerprint(h);
  }
  template <class Image>
  __device__ static bool same_key(const table_view& v, const Image& img, const varkey& k) {
    const char* record = v.base + img.value;
    if (*reinterpret_cast<const std::uint64_t*>(record) != k.bytes) return false;
    const auto* a = reinterpret_cast<const unsigned char*>(record + 8);
    const auto* b = static_cast<const unsigned char*>(k.data);
    for (std::uint32_t i = 0; i < k.bytes; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  __device__ static void store_key(const slot_ref&, const varkey&) {}
  template <class Tile>
  __device__ static void write_record(const table_view&, const Tile& t, char* cell,
                                      const varkey& k) {
    if (t.thread_rank() == 0) *reinterpret_cast<std::uint64_t*>(cell) = k.bytes;
    const auto* src = static_cast<const unsigned char*>(k.data);
    for (std::uint32_t i = t.thread_rank(); i < k.bytes; i += t.size()) cell[8 + i] = src[i];
  }
  GPM_HOST_DEVICE static varkey key_at(const table_view& v, const slot_image& img) {
    const char* record = v.base + img.value;
    return varkey{record + 8,
                  static_cast<std::uint32_t>(*reinterpret_cast<const std::uint64_t*>(record))};
  }
};

// ---- slots ---------------------------------------------------------------------------------

// An atomic load of a pool word at gpm::pool_scope (only GPU threads use the table while a
// kernel runs; the host recovers and resizes it between kernels).
__device__ inline std::uint64_t load_word(const std::uint64_t* p,
                                          memory_order order = memory_order_relaxed) {
  return atomic_ref<std::uint64_t, pool_scope>(*const_cast<std::uint64_t*>(p)).load(order);
}

GPM_HOST_DEVICE inline bool is_published(std::uint64_t word) {
  return word != kEmpty && word != kInserting;
}

GPM_HOST_DEVICE inline slot_ref slot_at(const table_view& v, std::uint32_t level,
                                        std::uint64_t bucket, std::uint32_t s) {
  char* lvl = v.base + v.level_offset[v.top - level];
  return {reinterpret_cast<std::uint64_t*>(lvl) + bucket * v.slots * v.slot_words, s, v.slots};
}

// The fingerprint mirror's word of a slot; null when the view has no mirror.
GPM_HOST_DEVICE inline std::uint64_t* mirror_word(const table_view& v, std::uint32_t level,
                                                  std::uint64_t bucket, std::uint32_t s) {
  std::uint64_t* const m = v.mirror[v.top - level];
  return m == nullptr ? nullptr : m + bucket * v.slots + s;
}

// A slot's update generation word (combine_update); null when the view has none.
GPM_HOST_DEVICE inline std::uint32_t* update_gen_word(const table_view& v, std::uint32_t level,
                                                      std::uint64_t bucket, std::uint32_t s) {
  std::uint32_t* const g = v.update_gen[v.top - level];
  return g == nullptr ? nullptr : g + bucket * v.slots + s;
}

// Slot s of cache bucket y.
GPM_HOST_DEVICE inline slot_ref cached_slot(const table_view& v, std::uint64_t y, std::uint32_t s) {
  return {v.cache.slots + y * v.slots * v.slot_words, s, v.slots};
}

// The bucket of hash location j in `level`: the low `level` bits of the location's hash. A
// bucket of level l is thus shared by the 2^(top-l) top-level buckets that agree on those bits
// (inter-level sharing), and an item's bucket does not change when a level is added on top.
GPM_HOST_DEVICE inline std::uint64_t level_bucket(const table_view& v, std::uint64_t h,
                                                  std::uint32_t j, std::uint32_t level) {
  return mix64(h + (j + 1) * 0x9e3779b97f4a7c15ull) & ((1ull << level) - 1);
}

// Validity order of copies of one key (FAST'25 §3.2.2): max level, then min bucket, then min
// slot. 0 means "no copy".
inline constexpr std::uint64_t kBucketField = (1ull << 52) - 1;
GPM_HOST_DEVICE inline std::uint64_t copy_rank(std::uint32_t level, std::uint64_t bucket,
                                               std::uint32_t s) {
  return (static_cast<std::uint64_t>(level + 1) << 58) | ((kBucketField - bucket) << 6) | (63 - s);
}
struct location {
  std::uint32_t level;
  std::uint64_t bucket;
  std::uint32_t slot;
};
GPM_HOST_DEVICE inline location location_of_rank(std::uint64_t r) {
  return {static_cast<std::uint32_t>(r >> 58) - 1, kBucketField - ((r >> 6) & kBucketField),
          63 - static_cast<std::uint32_t>(r & 63)};
}

// Reads a slot: the fingerprint word (from `word_at` when given: the mirror), and the value
// offset and key words only if the fingerprint word is `wanted` (kNone: always). The fingerprint
// word is read with acquire, so the item is read after its publication. With `ordered`, every
// word is, so that a later load (a seqlock re-check) is ordered after them all.
template <class Key>
__device__ inline slot_image load_slot(const slot_ref& p, std::uint64_t wanted = kNone,
                                       bool ordered = false,
                                       const std::uint64_t* word_at = nullptr) {
  const memory_order rest = ordered ? memory_order_acquire : memory_order_relaxed;
  slot_image img;
  img.word = load_word(word_at != nullptr ? word_at : &p[0], memory_order_acquire);
  if (wanted != kNone && img.word != wanted) return img;
  img.value = load_word(&p[1], rest);
  if constexpr (std::is_same_v<Key, key32>) {
    for (std::uint32_t i = 0; i < 4; ++i) img.key[i] = load_word(&p[2 + i], rest);
  }
  return img;
}

// Reads a slot of the table (not of the cache): its fingerprint word from the mirror when the
// view has one, its other words from the pool. A reader that finds the fingerprint in the mirror
// does not read the pool's own word again: the mirror holds a fingerprint only from after its
// publication was durable until after its clear was, and the pool slot's other words are written
// only by the holder of a claim on the mirror word, which needs it EMPTY. So the value offset and
// key read next are the item's, unless the slot was erased and claimed again between the loads:
// the window the pool path has between its fingerprint load and these loads (a slot is read word
// by word; a find compares the key). An erase whose pool clear the reader's loads overtake is
// ordered after the find: mirror readers see it at its mirror store, before the erase returns.
// Re-reading the pool's word would add the dependent round trip across PCIe that the mirror
// saves.
template <class Key>
__device__ inline slot_image load_table_slot(const table_view& v, std::uint32_t level,
                                             std::uint64_t bucket, std::uint32_t s,
                                             std::uint64_t wanted = kNone) {
  return load_slot<Key>(slot_at(v, level, bucket, s), wanted, false,
                        mirror_word(v, level, bucket, s));
}

GPM_HOST_DEVICE inline std::uint64_t global_bucket(const cache_view& c, std::uint32_t level,
                                                   std::uint64_t bucket) {
  if (level < c.bottom || level > c.top) return kNone;
  return (1ull << level) + bucket - (1ull << c.bottom);
}

// The level and bucket of global bucket id x (global_bucket's inverse); slot 0.
GPM_HOST_DEVICE inline location bucket_of_global(const cache_view& c, std::uint64_t x) {
  std::uint32_t level = c.bottom;
  while (level < c.top && (1ull << (level + 1)) - (1ull << c.bottom) <= x) ++level;
  return {level, x + (1ull << c.bottom) - (1ull << level), 0};
}

// Reads a slot from the cached copy of its bucket when one is ready and unchanged across the
// read (seqlock plus mapping re-check), else from the table (load_table_slot); `from` says which.
// A cached slot is one version of all its words, fingerprint included, under its seqlock (the
// value cache relies on it), so with the mirror on a cached read still takes the cached
// fingerprint word: the mirror serves the buckets the cache does not hold. The reader uses
// acquire loads only, in a chain (mapping, seqlock, slot words, then the re-checks): a fence here
// would be a GPU-wide barrier per slot read, which is what made cached reads slower than the
// pool's.
template <class Key>
__device__ inline slot_image read_slot(const table_view& v, std::uint32_t level,
                                       std::uint64_t bucket, std::uint32_t s, std::uint64_t wanted,
                                       cache_ticket& from) {
  from = {};
  const cache_view& c = v.cache;
  if (c.map != nullptr) {
    const std::uint64_t gid = global_bucket(c, level, bucket);
    if (gid != kNone) {
      using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
      const std::uint32_t m = ref32(c.map[gid]).load(memory_order_acquire);
      if (m & 1u) {
        const std::uint64_t y = (m >> 1) - 1;
        const std::uint64_t idx = y * v.slots + s;
        const std::uint32_t q1 = ref32(c.seq[idx]).load(memory_order_acquire);
        if ((q1 & 1u) == 0) {
          const slot_image img = load_slot<Key>(cached_slot(v, y, s), wanted, true);
          if (ref32(c.seq[idx]).load(memory_order_relaxed) == q1 &&
              ref32(c.map[gid]).load(memory_order_relaxed) == m) {
            from = {idx, gid, q1, m};
            return img;
          }
        }
      }
    }
  }
  return load_table_slot<Key>(v, level, bucket, s, wanted);
}

// The value bytes of the cell at pool offset `off` (after its key record).
GPM_HOST_DEVICE inline char* cell_value(const table_view& v, std::uint64_t off) {
  return v.base + off + v.key_area;
}

// Copies pool slot (level, bucket, s) into slot s of cache bucket y under that slot's seqlock
// (odd while the copy is in progress), so readers never keep a half-copied slot. With the value
// cache on, the value of a published slot is copied too, inside the same critical section, from
// the cell its offset names: cells are immutable while published, and a retired one is reused
// only after reclaim(), which follows the batch of the writer that retired it and so this copy.
__device__ inline void copy_slot_to_cache(const table_view& v, std::uint32_t level,
                                          std::uint64_t bucket, std::uint32_t s, std::uint64_t y) {
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  using ref64 = atomic_ref<std::uint64_t, thread_scope::device>;
  const cache_view& c = v.cache;
  const std::uint64_t idx = y * v.slots + s;
  std::uint32_t q = ref32(c.seq[idx]).load(memory_order_relaxed);
  while ((q & 1u) || !ref32(c.seq[idx]).compare_exchange_weak(q, q + 1, memory_order_acquire)) {
    __nanosleep(32);
    q = ref32(c.seq[idx]).load(memory_order_relaxed);
  }
  // Release fence, then the copy: a reader whose acquire load sees a copied word also sees the
  // odd sequence number, and so discards what it read.
  atomic_thread_fence<thread_scope::device>(memory_order_release);
  const slot_ref src = slot_at(v, level, bucket, s);
  const slot_ref dst = cached_slot(v, y, s);
  // Acquire loads: the value offset is the one published with the fingerprint word (or later),
  // and the cell it names is read below after the writes that filled it (its writer persisted, a
  // fence, before storing the offset).
  const std::uint64_t word = load_word(&src[0], memory_order_acquire);
  const std::uint64_t offset = load_word(&src[1], memory_order_acquire);
  ref64(dst[0]).store(word, memory_order_relaxed);
  ref64(dst[1]).store(offset, memory_order_relaxed);
  for (std::uint32_t i = 2; i < v.slot_words; ++i) {
    ref64(dst[i]).store(load_word(&src[i]), memory_order_relaxed);
  }
  if (c.values != nullptr && is_published(word)) {
    const std::uint32_t words = v.value_bytes / 8;
    const auto* cell = reinterpret_cast<const std::uint64_t*>(cell_value(v, offset));
    std::uint64_t* to = c.values + idx * words;
    for (std::uint32_t i = 0; i < words; ++i) {
      ref64(to[i]).store(load_word(&cell[i]), memory_order_relaxed);
    }
  }
  ref32(c.seq[idx]).store(q + 2, memory_order_release);
}

// Copies the value of the key's valid copy out of the value cache, when the probe read that copy
// from the cache (`from`): every lane reads its words between two checks that the slot's seqlock
// and its bucket's mapping still hold what the probe's read found, so the value is the one of the
// cell at the offset the probe returned. Each lane checks for itself, with the acquire chain of
// read_slot (seqlock, value words, re-checks; no fence): a seqlock orders only the loads of the
// thread that reads it. False, in every lane, when a check failed or the copy was not cached: the
// caller then reads the pool. Of the finds whose copy was cached, counts those served and those
// that fell back.
template <class Tile>
__device__ bool copy_cached_value(const table_view& v, const Tile& t, void* dst,
                                  const cache_ticket& from) {
  const cache_view& c = v.cache;
  if (c.values == nullptr || from.slot == kNone) return false;
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  using ref64 = atomic_ref<std::uint64_t, thread_scope::device>;
  const std::uint32_t words = v.value_bytes / 8;
  std::uint64_t* src = c.values + from.slot * words;
  auto* d = static_cast<std::uint64_t*>(dst);
  bool ok = true;
  if (t.thread_rank() < words) {
    ok = ref32(c.seq[from.slot]).load(memory_order_acquire) == from.seq;
    for (std::uint32_t i = t.thread_rank(); ok && i < words; i += t.size()) {
      d[i] = ref64(src[i]).load(memory_order_acquire);
    }
    ok = ok && ref32(c.seq[from.slot]).load(memory_order_relaxed) == from.seq &&
         ref32(c.map[from.bucket]).load(memory_order_relaxed) == from.map;
  }
  const bool served = t.ballot(!ok) == 0;
  if (t.thread_rank() == 0) atomicAdd(&c.counters[served ? 2 : 3], 1ull);
  return served;
}

// After a writer changed a slot in the pool: copies the slot into the cached copy of its bucket
// (ready or being fetched). The copy is taken under the slot's seqlock, after the pool write, so
// the last writer's copy reflects the final pool state. The mapping's loads are seq_cst: the pool
// write is ordered before them, as the fetch kernel orders its mapping store before its pool
// loads, so a slot written while its bucket is being fetched is copied by one side or the other.
__device__ inline void cache_refresh(const table_view& v, std::uint32_t level, std::uint64_t bucket,
                                     std::uint32_t s) {
  const cache_view& c = v.cache;
  if (c.map == nullptr) return;
  const std::uint64_t gid = global_bucket(c, level, bucket);
  if (gid == kNone) return;
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  const std::uint32_t m = ref32(c.map[gid]).load();
  if (m == 0) return;
  const std::uint64_t y = (m >> 1) - 1;
  ref32(c.refs[y]).fetch_add(1);
  if ((ref32(c.map[gid]).load() >> 1) == (m >> 1)) copy_slot_to_cache(v, level, bucket, s, y);
  ref32(c.refs[y]).fetch_sub(1);
}

// Counts an access to a bucket for the cache's LFU / LRU choice. Every probe counts each candidate
// bucket it reads (one-shot access reads them all, so a hot key makes all of them hot); counting
// only the bucket holding the key would cache a quarter of what a search of it reads.
__device__ inline void note_access(const table_view& v, std::uint32_t level, std::uint64_t bucket) {
  const cache_view& c = v.cache;
  if (c.map == nullptr) return;
  const std::uint64_t gid = global_bucket(c, level, bucket);
  if (gid == kNone) return;
  atomicAdd(&c.freq[gid], 1u);
  atomic_ref<std::uint32_t, thread_scope::device>(c.stamp[gid]).store(c.now, memory_order_relaxed);
}

// ---- value area ----------------------------------------------------------------------------

GPM_HOST_DEVICE inline std::uint64_t cell_offset(const table_view& v, std::uint64_t cell) {
  std::uint32_t s = 0;
  while (s + 1 < v.segments && cell >= v.seg_first[s + 1]) ++s;
  return v.seg_offset[s] + (cell - v.seg_first[s]) * v.cell_bytes;
}

// The cell at pool offset `off`, or kNone if `off` is not the start of a cell.
GPM_HOST_DEVICE inline std::uint64_t cell_of(const table_view& v, std::uint64_t off) {
  for (std::uint32_t s = 0; s < v.segments; ++s) {
    const std::uint64_t cells = v.seg_first[s + 1] - v.seg_first[s];
    if (off >= v.seg_offset[s] && off < v.seg_offset[s] + cells * v.cell_bytes) {
      const std::uint64_t rel = off - v.seg_offset[s];
      if (rel % v.cell_bytes != 0) return kNone;
      return v.seg_first[s] + rel / v.cell_bytes;
    }
  }
  return kNone;
}

// Takes a free cell, searching the bitmap from word `from`; returns its pool offset or 0, and in
// `found` the word it came from.
__device__ inline std::uint64_t allocate_cell(const table_view& v, std::uint64_t from,
                                              std::uint64_t& found) {
  for (std::uint64_t k = 0; k < v.bitmap_words; ++k) {
    const std::uint64_t wi = (from + k) % v.bitmap_words;
    atomic_ref<std::uint64_t, thread_scope::device> word(v.bitmap[wi]);
    std::uint64_t taken = word.load(memory_order_relaxed);
    while (taken != ~0ull) {
      const int bit = __ffsll(static_cast<long long>(~taken)) - 1;
      const std::uint64_t mask = 1ull << bit;
      const std::uint64_t before = word.fetch_or(mask);
      if ((before & mask) == 0) {
        found = wi;
        return cell_offset(v, wi * 64 + bit);
      }
      taken = before | mask;
    }
  }
  return 0;
}

// Returns a cell that was never published (no reader can hold it).
__device__ inline void free_unpublished_cell(const table_view& v, std::uint64_t off) {
  const std::uint64_t cell = cell_of(v, off);
  if (cell == kNone) return;
  atomic_ref<std::uint64_t, thread_scope::device>(v.bitmap[cell / 64])
      .fetch_and(~(1ull << (cell % 64)));
}

// Frees a published cell at the next reclaim().
__device__ inline void retire_cell(const table_view& v, std::uint64_t off) {
  const std::uint64_t cell = cell_of(v, off);
  if (cell == kNone) return;
  atomicOr(reinterpret_cast<unsigned long long*>(&v.retired[cell / 64]), 1ull << (cell % 64));
}

// Copies a value with every lane of the tile. With `cell`, the copy goes into that pool cell
// (after its key record), and every lane makes the whole cell durable before any lane publishes.
template <class Tile>
__device__ inline void copy_value(const table_view& v, const Tile& t, void* dst, const void* src,
                                  const char* cell = nullptr) {
  auto* d = static_cast<std::uint64_t*>(dst);
  const auto* s = static_cast<const std::uint64_t*>(src);
  for (std::uint32_t i = t.thread_rank(); i < v.value_bytes / 8; i += t.size()) d[i] = s[i];
  if (cell != nullptr) persist_at(v, "gphash.value.write", cell, v.cell_bytes);
  t.sync();
}

// ---- the probe -----------------------------------------------------------------------------

struct probe_result {
  std::uint64_t match = 0;        // copy_rank of the valid copy of the key, 0 if absent
  std::uint64_t match_value = 0;  // its value offset
  std::uint64_t empty = kNone;    // (location load << 40 | candidate << 8 | slot), see probe()
  cache_ticket from;              // where the valid copy was read (kept only with a value cache)
};

// The most hash locations a table has (gphash_config::hash_count).
inline constexpr std::uint32_t kMaxHashes = 4;

// Reads every candidate slot of the key once (one-shot: H hashes x L levels x K slots, split
// over the tile's lanes) and finds the valid copy of the key and, if asked, where to insert it:
// in the less-loaded hash location (the L buckets one hash reaches, summed), its first empty
// slot top level first. Keeping the lower levels, which two or more top buckets share, free
// until a top bucket fills is what lifts the load factor at the first full insert from ~0.81
// (least-loaded single bucket) to ~0.9 (docs/gphash.md).
template <class Key, class Tile>
__device__ probe_result probe(const table_view& v, const Tile& t, const Key& key, std::uint64_t h,
                              std::uint64_t w, bool want_empty) {
  const std::uint32_t G = t.size();
  const std::uint32_t K = v.slots;
  const std::uint32_t N = v.hash_count * v.levels * K;
  const std::uint32_t rank = t.thread_rank();
  const std::uint32_t U = v.levels * K;  // candidate slots per hash location
  probe_result r;
  std::uint32_t loc_load[kMaxHashes] = {};
  std::uint32_t loc_first[kMaxHashes];
  for (std::uint32_t& f : loc_first) f = ~0u;
  const bool counting = v.cache.map != nullptr;
  unsigned long long hits = 0;
  unsigned long long reads = 0;
  for (std::uint32_t base = 0; base < N; base += G) {
    const std::uint32_t i = base + rank;
    const bool valid = i < N;
    const std::uint32_t c = i / K;
    const std::uint32_t s = i % K;
    const std::uint32_t d = c % v.levels;
    const std::uint32_t level = v.top - d;
    std::uint64_t bucket = 0;
    slot_image img;
    cache_ticket from;
    if (valid) {
      bucket = level_bucket(v, h, c / v.levels, level);
      img = read_slot<Key>(v, level, bucket, s, w, from);
      if (s == 0) note_access(v, level, bucket);
    }
    if (counting) {
      hits += __popc(t.ballot(from.slot != kNone));
      reads += __popc(t.ballot(valid));
    }
    const bool matched = valid && img.word == w && key_ops<Key>::same_key(v, img, key);
    const std::uint64_t mine = matched ? copy_rank(level, bucket, s) : 0;
    std::uint64_t prio = mine;
    std::uint64_t value = img.value;
    tile_max_pair(t, prio, value);
    if (prio > r.match) {
      r.match = prio;
      r.match_value = value;
      if (v.cache.values != nullptr) {
        // The lane that read this copy hands over where from. Two lanes read the same slot when
        // two hash locations share a bucket; either one's read is consistent with its value.
        const unsigned int lanes = t.ballot(mine == prio && img.value == value);
        const int lane = __ffs(static_cast<int>(lanes)) - 1;
        r.from = {t.shfl(from.slot, lane), t.shfl(from.bucket, lane), t.shfl(from.seq, lane),
                  t.shfl(from.map, lane)};
      }
    }
    if (!want_empty) continue;
    // Candidate i belongs to location i / U; i runs over a location's slots top level first.
    const unsigned int occupied = t.ballot(valid && img.word != kEmpty);
    const unsigned int empty = t.ballot(valid && img.word == kEmpty);
    for (std::uint32_t j = 0; j < kMaxHashes && j < v.hash_count; ++j) {
      const unsigned int lanes = t.ballot(valid && i / U == j);  // location j's candidates
      loc_load[j] += __popc(occupied & lanes);
      if (loc_first[j] == ~0u && (empty & lanes) != 0) {
        loc_first[j] = base + __ffs(static_cast<int>(empty & lanes)) - 1;
      }
    }
  }
  if (want_empty) {
    for (std::uint32_t j = 0; j < kMaxHashes; ++j) {
      if (loc_first[j] == ~0u) continue;
      const std::uint64_t cand = static_cast<std::uint64_t>(loc_load[j]) << 40 |
                                 static_cast<std::uint64_t>(loc_first[j] / K) << 8 |
                                 loc_first[j] % K;
      if (cand < r.empty) r.empty = cand;
    }
  }
  if (counting && rank == 0) {
    atomicAdd(&v.cache.counters[0], hits);
    atomicAdd(&v.cache.counters[1], reads - hits);
  }
  return r;
}

GPM_HOST_DEVICE inline location location_of_empty(const table_view& v, std::uint64_t h,
                                                  std::uint64_t e) {
  const std::uint32_t c = static_cast<std::uint32_t>((e >> 8) & 0xffffffffu);
  const std::uint32_t d = c % v.levels;
  return {v.top - d, level_bucket(v, h, c / v.levels, v.top - d),
          static_cast<std::uint32_t>(e & 0xff)};
}

// ---- operations ----------------------------------------------------------------------------

// After a lost CAS (replace_value): waits until BktCache, when it holds the slot's bucket ready,
// no longer names `old` as the slot's value offset. The update that won swapped the pool's
// offset and refreshes the cache only after; without this wait the loser, ordered before that
// swap, could return while the cache still served `old`, and a find of its own tile that
// followed would read the value from before both. The winner's refresh, or a fetch of the bucket
// (which copies the pool after mapping it), ends the wait; `old` cannot come back before the
// reclaim after the batch.
__device__ inline void await_cache_past(const table_view& v, const location& at,
                                        std::uint64_t old) {
  const cache_view& c = v.cache;
  if (c.map == nullptr) return;
  const std::uint64_t gid = global_bucket(c, at.level, at.bucket);
  if (gid == kNone) return;
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  for (;;) {
    const std::uint32_t m = ref32(c.map[gid]).load(memory_order_acquire);
    if ((m & 1u) == 0) return;  // not cached, or being fetched: readers read the pool
    if (load_word(&cached_slot(v, (m >> 1) - 1, at.slot)[1], memory_order_acquire) != old) return;
    __nanosleep(64);
  }
}

// Points the key's valid copy at a new value cell (out of place, one CAS). A lost CAS means the
// slot's value offset changed after the probe read it: an update of the key (or an erase, then
// an insert into the slot) took effect while this update ran. This update is then ordered just
// before that change, which overwrites it unseen (a blind write, like the Thomas write rule), so
// it is done and releases its cell, once BktCache no longer serves the offset it expected
// (await_cache_past). Updates thus never retry; retrying instead made a hot
// key's updates under skew a storm of failing CASes over PCIe. Its persist orders the winning
// write (observed) before anything this thread publishes later. Returns whether the CAS won, in
// every lane.
template <class Tile>
__device__ bool replace_value(const table_view& v, const Tile& t, const probe_result& r,
                              std::uint64_t cell) {
  bool ok = false;
  if (t.thread_rank() == 0) {
    const location at = location_of_rank(r.match);
    const slot_ref slot = slot_at(v, at.level, at.bucket, at.slot);
    std::uint64_t expected = r.match_value;
    kernel_crash_point(v.crash, "gphash.update.prepared");
    ok = atomic_ref<std::uint64_t, pool_scope>(slot[1]).compare_exchange_strong(expected, cell);
    persist_at(v, "gphash.update.swap", &slot[1], sizeof slot[1]);
    if (ok) {
      retire_cell(v, r.match_value);
      cache_refresh(v, at.level, at.bucket, at.slot);
    } else {
      free_unpublished_cell(v, cell);
      await_cache_past(v, at, r.match_value);
    }
  }
  return t.shfl(ok ? 1 : 0, 0) != 0;
}

// Takes a value cell and fills it (key record and value), durably unless `durable` is false
// (an insert makes it durable with its slot's words: item_durable); 0 when the value area is
// full.
template <class Key, class Tile>
__device__ std::uint64_t new_value(const table_view& v, const Tile& t, const Key& key,
                                   const void* value, bool durable = true) {
  std::uint64_t cell = 0;
  // The tiles of a block take cells from their block's cursor (table_view::cursors): a bitmap
  // word (64 adjacent cells) they fill before the cursor moves on, so a block's value writes land
  // on a few pages of the pool at a time rather than on a random page each: random accesses from
  // a GPU run several times faster within a narrow span of host memory than over gigabytes, for
  // 8-byte stores and 128-byte reads alike (docs/gphash.md, "Value cells"). Cursors start at
  // hashed words, so blocks, and with them the updates of one hot key, allocate in different
  // places.
  if (t.thread_rank() == 0 && v.bitmap_words != 0) {
    atomic_ref<std::uint64_t, thread_scope::device> cursor(v.cursors[blockIdx.x & v.cursor_mask]);
    const std::uint64_t from = cursor.load(memory_order_relaxed) % v.bitmap_words;
    std::uint64_t found = from;
    cell = allocate_cell(v, from, found);
    if (cell != 0 && found != from) cursor.store(found, memory_order_relaxed);
  }
  cell = t.shfl(cell, 0);
  if (cell != 0) {
    key_ops<Key>::write_record(v, t, v.base + cell, key);
    copy_value(v, t, cell_value(v, cell), value, durable ? v.base + cell : nullptr);
  }
  return cell;
}

// ---- locks ---------------------------------------------------------------------------------

// The lock of `id` (a key's hash, or a bucket's copy_rank(level, bucket, 0)): ids that share a
// word share the lock, which only ever costs waiting.
__device__ inline atomic_ref<std::uint32_t, thread_scope::device> lock_word(const table_view& v,
                                                                            std::uint64_t id) {
  return atomic_ref<std::uint32_t, thread_scope::device>(v.locks[mix64(id) & v.lock_mask]);
}

// Takes the lock with the tile's first lane; whether it did, in every lane.
template <class Tile>
__device__ bool try_lock(const Tile& t, atomic_ref<std::uint32_t, thread_scope::device> lock) {
  std::uint32_t free = 0;
  const bool got =
      t.thread_rank() == 0 && lock.compare_exchange_strong(free, 1, memory_order_acquire);
  return t.shfl(got ? 1 : 0, 0) != 0;
}

// Waits for the lock. A tile holds at most one lock while it waits for one (none), so waits form
// no cycle.
template <class Tile>
__device__ void lock(const Tile& t, atomic_ref<std::uint32_t, thread_scope::device> lock) {
  while (!try_lock(t, lock)) __nanosleep(64);
}

template <class Tile>
__device__ void unlock(const Tile& t, atomic_ref<std::uint32_t, thread_scope::device> lock) {
  t.sync();
  if (t.thread_rank() == 0) lock.store(0, memory_order_release);
}

// The persist sites and crash points of a placement (place_item): an insert's or a move's.
// Functions, not constants: device code cannot use a host variable of class type.
struct placement_sites {
  const char* claim;      // persist of the value offset and key words
  const char* publish;    // persist of the published fingerprint word
  const char* filled;     // crash point before the first persist (null: none)
  const char* published;  // crash point after the second
  GPM_HOST_DEVICE static constexpr placement_sites insert() {
    return {"gphash.insert.claim", "gphash.insert.publish", "gphash.insert.claimed",
            "gphash.insert.published"};
  }
  GPM_HOST_DEVICE static constexpr placement_sites move() {
    return {"gphash.move.claim", "gphash.move.publish", nullptr, "gphash.move.copied"};
  }
};

// The words of slot `slot` that an item's claim writes (value offset and key): one range from
// word 1 to the last key word, which also spans other slots' words.
__device__ inline const char* item_words(const table_view& v, const slot_ref& slot,
                                         std::size_t& len) {
  const char* item = reinterpret_cast<const char*>(&slot[1]);
  len = reinterpret_cast<const char*>(&slot[v.slot_words - 1] + 1) - item;
  return item;
}

// Claims the empty slot `at` for an item (value offset `value`, `key`), with one thread
// (FAST'25 §3.2.3: EMPTY -> INSERTING) and stores its value offset and key, not yet durable.
// False if the slot was taken meanwhile. With the fingerprint mirror, concurrent claims
// arbitrate on the mirror's word (a CAS in GPU memory, not a round trip across PCIe): its holder
// alone writes the pool slot, which an erase emptied in the pool, durably, before it emptied the
// mirror word (unmirror). The pool's word then stays EMPTY until the publication (one store
// across PCIe fewer per insert): a crash before it leaves an EMPTY slot whose value and key words
// no reader, recovery included, looks at, and a value cell no published slot names, which
// recovery's allocator rebuild frees, as it does a cleared INSERTING slot's.
template <class Key>
__device__ bool claim_slot(const table_view& v, const location& at, std::uint64_t value,
                           const Key& key, const placement_sites& site) {
  const slot_ref slot = slot_at(v, at.level, at.bucket, at.slot);
  std::uint64_t* const mirror = mirror_word(v, at.level, at.bucket, at.slot);
  std::uint64_t expected = kEmpty;
  if (mirror == nullptr) {
    if (!atomic_ref<std::uint64_t, pool_scope>(slot[0]).compare_exchange_strong(expected,
                                                                                kInserting)) {
      return false;
    }
  } else if (!atomic_ref<std::uint64_t, thread_scope::device>(*mirror).compare_exchange_strong(
                 expected, kInserting)) {
    return false;
  }
  atomic_ref<std::uint64_t, pool_scope>(slot[1]).store(value, memory_order_relaxed);
  key_ops<Key>::store_key(slot, key);
  if (site.filled != nullptr) kernel_crash_point(v.crash, site.filled);
  return true;
}

// Publishes the claimed slot `at` (fingerprint word `word`), with the thread that claimed it,
// once the item's words are durable: the publication is durable before the operation is
// acknowledged (or the source of a move is cleared). The fingerprint enters the mirror only
// then, so mirror readers see only durable items.
__device__ inline void publish_item(const table_view& v, const location& at, std::uint64_t word,
                                    const placement_sites& site) {
  const slot_ref slot = slot_at(v, at.level, at.bucket, at.slot);
  atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(word, memory_order_release);
  persist_at(v, site.publish, &slot[0], sizeof slot[0]);
  kernel_crash_point(v.crash, site.published);
  std::uint64_t* const mirror = mirror_word(v, at.level, at.bucket, at.slot);
  if (mirror != nullptr) {
    atomic_ref<std::uint64_t, thread_scope::device>(*mirror).store(word, memory_order_release);
  }
  cache_refresh(v, at.level, at.bucket, at.slot);
}

// Puts an item (fingerprint word `word`, value offset `value` of a durable cell, `key`) into the
// empty slot `at`, with one thread: claim_slot, persist the item's words, publish_item. False if
// the slot was taken meanwhile.
template <class Key>
__device__ bool place_item(const table_view& v, const location& at, std::uint64_t word,
                           std::uint64_t value, const Key& key, const placement_sites& site) {
  if (!claim_slot(v, at, value, key, site)) return false;
  std::size_t len = 0;
  const char* item = item_words(v, slot_at(v, at.level, at.bucket, at.slot), len);
  persist_at(v, site.claim, item, len);  // the item is durable before it becomes visible
  publish_item(v, at, word, site);
  return true;
}

// After the pool's fingerprint word of slot `at` was cleared and the clear persisted (an erase, or
// a move clearing its source): the mirror follows, only then. While the mirror still holds the
// fingerprint, no insert can claim the slot and inserts of the key still find it; emptying the
// mirror first would let an insert of the key publish a new copy in another slot, acknowledged,
// while the erased copy is not yet durably gone: after a crash both would be in the pool, and
// recovery's dedupe pass keeps the valid copy by its position (level, bucket, slot), not by its
// age, so the old copy, and the old value, could come back over the newer insert.
// The mirror word holds the item's fingerprint here, never INSERTING: an erase holds the key's
// lock, which an insert of the key keeps until its fingerprint is in the mirror, and a move clears
// a published source beside no erase or insert of the key.
__device__ inline void unmirror(const table_view& v, const location& at) {
  std::uint64_t* const mirror = mirror_word(v, at.level, at.bucket, at.slot);
  if (mirror == nullptr) return;
  atomic_ref<std::uint64_t, thread_scope::device>(*mirror).store(kEmpty, memory_order_release);
}

// FAST'25 §3.2.3: claim an empty slot (CAS EMPTY -> INSERTING), write the item, persist, publish
// the fingerprint, persist. The paper tolerates the duplicates that concurrent inserts of one key
// can publish; here an insert holds its key's lock (lock_word of its hash) from its probe to its
// publication, so a key's concurrent inserts run one after another: the first inserts, the others
// find its copy. An earlier version re-read all candidates from the pool after the claim instead
// (a conflict check), a second probe across PCIe per insert.
// Two system fences in a row per insert, not three: the new value cell is made durable with the
// claimed slot's words, each lane fencing once after its part (a fence makes all of the thread's
// earlier stores durable), rather than before the claim. Nothing needs the cell durable sooner:
// only a published slot names it, and recovery's allocator rebuild frees a cell no published
// slot names. An upsert that finds the key after all makes its cell durable before the swap.
template <class Key, class Tile>
__device__ hash_status insert(const table_view& v, const Tile& t, const Key& key, const void* value,
                              insert_mode mode, std::uint64_t given = 0) {
  if (!key_ops<Key>::valid(v, key)) return hash_status::invalid_key;
  const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
  const std::uint64_t w = key_ops<Key>::word(key, h);
  std::uint64_t cell = given;  // rehash moves the item's existing cell
  bool cell_durable = true;    // false: this insert's own cell, filled but not yet persisted
  const bool own = mode != insert_mode::rehash;
  const auto key_lock = lock_word(v, h);
  lock(t, key_lock);
  // The key is present (`r` holds its valid copy): insert and rehash leave it, upsert updates it.
  const auto present = [&](const probe_result& r) {
    unlock(t, key_lock);
    if (mode != insert_mode::upsert) {
      if (own && cell != 0 && t.thread_rank() == 0) free_unpublished_cell(v, cell);
      return hash_status::exists;
    }
    if (cell == 0) cell = new_value(v, t, key, value);
    if (cell == 0) return hash_status::no_value_space;
    if (!cell_durable) {
      persist_at(v, "gphash.value.write", v.base + cell, v.cell_bytes);
      t.sync();
    }
    replace_value(v, t, r, cell);
    return hash_status::updated;
  };
  for (;;) {
    const probe_result r = probe(v, t, key, h, w, true);
    if (r.match != 0) return present(r);
    if (r.empty == kNone) {
      unlock(t, key_lock);
      if (own && cell != 0 && t.thread_rank() == 0) free_unpublished_cell(v, cell);
      return hash_status::full;
    }
    if (cell == 0) {
      cell = new_value(v, t, key, value, false);
      cell_durable = false;
    }
    if (cell == 0) {
      unlock(t, key_lock);
      return hash_status::no_value_space;
    }
    const location at = location_of_empty(v, h, r.empty);
    constexpr placement_sites site = placement_sites::insert();
    bool claimed = false;
    if (t.thread_rank() == 0) claimed = claim_slot(v, at, cell, key, site);
    if (t.shfl(claimed ? 1 : 0, 0) == 0) continue;  // another key took the slot: probe again
    // The item is durable before it becomes visible: every lane's part of a new cell, and the
    // claimed slot's words, with one fence per lane.
    const bool leader = t.thread_rank() == 0;
    if (!cell_durable) persist_later_at(v, "gphash.value.write", v.base + cell, v.cell_bytes);
    if (leader) {
      std::size_t len = 0;
      const char* item = item_words(v, slot_at(v, at.level, at.bucket, at.slot), len);
      persist_later_at(v, site.claim, item, len);
    }
    if (leader || !cell_durable) persist_named_at(v, site.claim);
    cell_durable = true;
    t.sync();
    if (leader) publish_item(v, at, w, site);
    unlock(t, key_lock);
    return hash_status::inserted;
  }
}

// ---- displacement --------------------------------------------------------------------------

enum class room { had, made, none };

// Moves the published item `img` (key `key`) from slot `from_at` to the empty slot `to_at`, with
// the tile's first lane, which holds the lock of `from_at`'s bucket: the copy is claimed, filled
// and published as an insert does, durably, and only then is the source cleared. A crash thus
// leaves the item in one place or in both, never in none, and both copies name the same value
// cell; recovery keeps the valid one (dedupe_kernel). False if `to_at` was taken meanwhile.
template <class Key>
__device__ bool move_item(const table_view& v, const location& from_at, const slot_image& img,
                          const Key& key, const location& to_at) {
  if (!place_item(v, to_at, img.word, img.value, key, placement_sites::move())) return false;
  // Nothing else changes the source: moves out of its bucket hold the lock, and no update or
  // erase runs beside displacement.
  const slot_ref from = slot_at(v, from_at.level, from_at.bucket, from_at.slot);
  atomic_ref<std::uint64_t, pool_scope>(from[0]).store(kEmpty, memory_order_relaxed);
  // Durable before what follows: once a later operation changes the copy, a source that came
  // back after a crash could be the valid copy and bring back the old item.
  persist_at(v, "gphash.move.clear", &from[0], sizeof from[0]);
  unmirror(v, from_at);
  cache_refresh(v, from_at.level, from_at.bucket, from_at.slot);
  return true;
}

// Makes room for an insert of `key` that found all its candidate slots taken (docs/gphash.md,
// "Displacement"; FAST'25 resizes instead): an item of one of the key's candidate buckets moves
// to an empty candidate slot of its own, freeing a slot the insert can take. Tries the buckets in
// candidate order, skipping any whose lock another tile holds, and in a bucket its items in slot
// order. `had`: the key is present or has room already. Runs only in a phase of its own, beside
// other displacement and inserts of absent keys, never beside updates or erases (a move clears a
// slot that an update could have just written).
template <class Key, class Tile>
__device__ room make_room(const table_view& v, const Tile& t, const Key& key) {
  if (!key_ops<Key>::valid(v, key)) return room::none;
  const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
  const probe_result r = probe(v, t, key, h, key_ops<Key>::word(key, h), true);
  if (r.match != 0 || r.empty != kNone) return room::had;
  const std::uint32_t buckets = v.hash_count * v.levels;
  for (std::uint32_t c = 0; c < buckets; ++c) {
    const std::uint32_t level = v.top - c % v.levels;
    const std::uint64_t bucket = level_bucket(v, h, c / v.levels, level);
    // The bucket's lock, so that two tiles never move one item; skipped when another holds it.
    const auto bucket_lock = lock_word(v, copy_rank(level, bucket, 0));
    if (!try_lock(t, bucket_lock)) continue;
    bool moved = false;
    for (std::uint32_t s = 0; s < v.slots && !moved; ++s) {
      // One lane reads the slot, so that the tile agrees on what it holds.
      slot_image img;
      if (t.thread_rank() == 0) img = load_table_slot<Key>(v, level, bucket, s);
      img.word = t.shfl(img.word, 0);
      if (!is_published(img.word)) continue;
      img.value = t.shfl(img.value, 0);
      for (std::uint64_t& k : img.key) k = t.shfl(k, 0);
      const Key item = key_ops<Key>::key_at(v, img);
      const std::uint64_t ih = key_ops<Key>::hash(item, v.seed);
      const probe_result ir = probe(v, t, item, ih, img.word, true);
      // Only the valid copy moves (a crash may have left another), and only to a slot of its
      // own; the bucket is full, so that slot lies in another bucket.
      if (ir.match != copy_rank(level, bucket, s) || ir.empty == kNone) continue;
      bool ok = false;
      if (t.thread_rank() == 0) {
        ok = move_item(v, {level, bucket, s}, img, item, location_of_empty(v, ih, ir.empty));
      }
      moved = t.shfl(ok ? 1 : 0, 0) != 0;
    }
    unlock(t, bucket_lock);
    if (moved) return room::made;
  }
  return room::none;
}

// Combined updates: an update of a slot either takes the slot's generation word `gen` (even ->
// odd; returns the odd value) to swap its own value in, or returns 0 once an update that took the
// word after this one first read it has swapped its value in durably and given the word back
// (even, 2 more). That update's swap came after this update started and before it returns, so
// this one is ordered just before it, overwritten unseen, as a lost CAS is (replace_value), and
// is as durable as the value that replaced it. An update that gives the word back without a swap
// (no value cell; a lost CAS) restores the even value it took, so it serves no one. A word first
// read odd is held by an update that may have swapped before this one started: the next holder's
// release is the one to wait for. `waited`: the word was taken by another update between this
// one's first read and its own taking of it (that update may have swapped the value since this
// one probed). Called by one lane; wraps around safely (differences of generations are small).
__device__ inline std::uint32_t combine_update(std::uint32_t* gen, bool& waited) {
  atomic_ref<std::uint32_t, thread_scope::device> word(*gen);
  const std::uint32_t first = word.load(memory_order_acquire);
  const std::uint32_t served = first + ((first & 1) != 0 ? 3 : 2);
  for (;;) {
    std::uint32_t now = word.load(memory_order_acquire);
    if (static_cast<std::int32_t>(now - served) >= 0) return 0;
    if ((now & 1) == 0 && word.compare_exchange_strong(now, now + 1, memory_order_acquire)) {
      waited = now != first;
      return now + 1;
    }
    __nanosleep(64);
  }
}

template <class Key, class Tile>
__device__ hash_status update(const table_view& v, const Tile& t, const Key& key,
                              const void* value) {
  if (!key_ops<Key>::valid(v, key)) return hash_status::invalid_key;
  const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
  const std::uint64_t w = key_ops<Key>::word(key, h);
  for (;;) {
    probe_result r = probe(v, t, key, h, w, false);
    if (r.match == 0) return hash_status::not_found;
    const location at = location_of_rank(r.match);
    std::uint32_t* const gen = update_gen_word(v, at.level, at.bucket, at.slot);
    std::uint32_t held = 0;
    bool waited = false;
    if (gen != nullptr && t.thread_rank() == 0) held = combine_update(gen, waited);
    held = t.shfl(held, 0);
    if (gen != nullptr && held == 0) return hash_status::updated;  // served, see combine_update
    // Gives the slot back: served (g + 2) once the swap won and is durable; unserved (g) when
    // nothing was swapped, so that the updates waiting for a served one keep waiting.
    const auto release = [&](bool served) {
      if (gen != nullptr && t.thread_rank() == 0) {
        atomic_ref<std::uint32_t, thread_scope::device>(*gen).store(held - 1 + (served ? 2 : 0),
                                                                    memory_order_release);
      }
    };
    // An update that waited through another's turn probed before that turn's swap: its CAS would
    // expect the value offset from before it, lose, and serve no one, so that each update arriving
    // during one turn took a losing turn of its own, one after another (YCSB A at batches of
    // 2^12 on an H200: 3.6x slower than separate updates). It probes again, holding the turn; if
    // the key has moved or left meanwhile, it gives the turn back and starts over.
    if (t.shfl(waited ? 1 : 0, 0) != 0) {
      const std::uint64_t rank = r.match;
      r = probe(v, t, key, h, w, false);
      if (r.match != rank) {
        release(false);
        continue;
      }
    }
    const std::uint64_t cell = new_value(v, t, key, value);
    if (cell == 0) {
      release(false);
      return hash_status::no_value_space;
    }
    release(replace_value(v, t, r, cell));
    return hash_status::updated;
  }
}

template <class Key, class Tile>
__device__ hash_status find(const table_view& v, const Tile& t, const Key& key, void* out) {
  if (!key_ops<Key>::valid(v, key)) return hash_status::invalid_key;
  const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
  const probe_result r = probe(v, t, key, h, key_ops<Key>::word(key, h), false);
  if (r.match == 0) return hash_status::not_found;
  if (out != nullptr && !copy_cached_value(v, t, out, r.from)) {
    copy_value(v, t, out, cell_value(v, r.match_value));
  }
  return hash_status::found;
}

template <class Key, class Tile>
__device__ hash_status erase(const table_view& v, const Tile& t, const Key& key) {
  if (!key_ops<Key>::valid(v, key)) return hash_status::invalid_key;
  const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
  const std::uint64_t w = key_ops<Key>::word(key, h);
  // The key's lock, as inserts take it: without it an erase that repeats while it finds a copy
  // could also remove the copy of an insert that came after its first removal and report one
  // erase for both (not linearizable: that insert found the key absent and returned inserted).
  const auto key_lock = lock_word(v, h);
  lock(t, key_lock);
  bool erased = false;
  for (;;) {
    const probe_result r = probe(v, t, key, h, w, false);
    if (r.match == 0) {
      unlock(t, key_lock);
      return erased ? hash_status::erased : hash_status::not_found;
    }
    bool ok = false;
    if (t.thread_rank() == 0) {
      const location at = location_of_rank(r.match);
      const slot_ref slot = slot_at(v, at.level, at.bucket, at.slot);
      std::uint64_t expected = w;
      ok = atomic_ref<std::uint64_t, pool_scope>(slot[0]).compare_exchange_strong(expected, kEmpty);
      persist_at(v, "gphash.erase.clear", &slot[0], sizeof slot[0]);
      if (ok) {
        unmirror(v, at);
        retire_cell(v, r.match_value);
        cache_refresh(v, at.level, at.bucket, at.slot);
      }
    }
    erased = erased || t.shfl(ok ? 1 : 0, 0) != 0;
  }
}

}  // namespace gpm::detail::hash
