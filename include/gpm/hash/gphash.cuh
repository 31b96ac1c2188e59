// gpm::gphash<Key>: GPHash (FAST'25), a persistent hash index that GPU kernels read and write
// directly in a gpm::pool. Multi-level buckets (level i holds 2^i buckets; only the top level is
// addressed by the hash functions), several hash locations, K-way slots, keys stored in place
// with fingerprints, fixed-size values in a persistent value area; lock-free and log-free
// operations; crash-tolerant resize; recovery; BktCache, a frozen bucket cache in GPU memory.
// Layout, protocol and recovery: docs/gphash.md. It never stores a pointer in the pool.
//
//   gpm::pool pool = gpm::pool::create("kv.pool", 1 << 30, "my-app");
//   auto table = gpm::gphash<std::uint64_t>::create(pool, "index", {.value_bytes = 128});
//   table.insert(keys_dev, values_dev, n, status_dev, stream);   // returns when durable
//   table.find(keys_dev, n, values_out_dev, status_dev, stream);
//   ... after a crash:
//   auto again = gpm::gphash<std::uint64_t>::open(pool, "index");  // recovers
//   again.last_recovery().seconds;
//
// Keys: std::uint64_t, gpm::key32 (stored in place) or gpm::varkey (variable length, stored by
// offset with the value). Bulk operations take device-accessible arrays (device memory, or host
// memory mapped into the GPU; any memory on the host backend), run on `stream`, and return once the
// batch is done and durable (process-crash durable for pools in tmpfs, see
// gpm::pool::durability()). Operations on the same key within one batch are concurrent: their order
// is unspecified, but the table stays consistent and holds one copy of the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gpm/hash/gphash_ref.cuh>
#include <gpm/platform/runtime.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm {

// The table's geometry, fixed at creation and stored in its header.
struct gphash_config {
  std::uint32_t hash_count = 2;                // hash locations per key (1..4)
  std::uint32_t level_count = 2;               // levels probed per key (1..4)
  std::uint32_t slots_per_bucket = 8;          // K-way associativity: 1, 2, 4, 8, 16 or 32
  std::uint32_t value_bytes = 128;             // bytes per value: a multiple of 8, at most 65536
  std::uint32_t top_level = 12;                // the top level holds 2^top_level buckets (1..40)
  std::uint32_t max_key_bytes = 64;            // gpm::varkey tables only: the longest key (1..4096)
  std::uint64_t seed = 0x6770686173680001ull;  // hash seed
};

// How bucket-cache victims and residents are chosen at each reload.
enum class cache_policy { lfu, lru, random };
const char* to_string(cache_policy p) noexcept;

struct cache_options {
  double fraction = 0.2;  // share of the buckets cached in GPU memory (0, 1]
  cache_policy policy = cache_policy::lfu;
  // Reload after every this many bulk operations (0: only when reload_cache() is called).
  std::uint32_t reload_every = 0;
  // The value cache: for tables whose value_bytes is at most this, the cache also holds the
  // value of each cached slot, slots_per_bucket * value_bytes bytes of GPU memory per cached
  // bucket, so that a find whose key the cache holds reads nothing from the pool. 0: never.
  // gpm::varkey tables never cache values (docs/gphash.md, "BktCache").
  std::uint32_t value_cache_limit = 128;
};

// Process-local choices, not stored in the pool.
struct gphash_options {
  // Cooperative-group size of the bulk operations' kernels: 1, 2, 4, 8, 16 or 32.
  std::uint32_t cg_size = 32;
  // insert/upsert move items to make room for the keys that found every candidate slot taken
  // (displacement, see make_room()), then retry them.
  bool displace = true;
  // insert/upsert add a level and retry the keys that still found no slot or no free value cell.
  bool auto_resize = true;
  std::uint32_t block_threads = 256;
  // Keeps a copy of every slot's fingerprint word in GPU memory (8 bytes per slot of the live
  // levels), so that probes read fingerprints from there and the pool only for the slots whose
  // fingerprint matches, and inserts claim slots there (docs/gphash.md, "The fingerprint mirror").
  // On an H200, YCSB C and LOAD ran 1.7-1.8x faster with it; off saves its GPU memory.
  bool fingerprint_mirror = true;
  // Concurrent updates of one slot combine (docs/gphash.md, "Combined updates"): one of them at a
  // time writes a value cell and swaps it into the pool's slot; the others that arrived before it
  // started return `updated` once it is durable, linearized just before it, without touching the
  // pool. A generation word per slot of the live levels in GPU memory (4 bytes). On an H200 YCSB A
  // ran 1.4-3.4x faster combined at batches of 2^12 to 2^20 (docs/gphash.md, "Combined updates").
  // Off saves its GPU memory.
  bool combine_updates = true;
};

// What recover() did; open() runs it and keeps the report (last_recovery()).
struct gphash_recovery {
  double seconds = 0;                    // wall time of the whole recovery
  std::uint64_t inserting_cleared = 0;   // slots left INSERTING by a crash, cleared
  std::uint64_t duplicates_removed = 0;  // copies of a key that lost to the valid copy
  // Of those, the copies below of items that an interrupted rehash had already copied up, cleared
  // when the resize resumed; the rest were found by the pass over the live levels.
  std::uint64_t resumed_duplicates = 0;
  bool resize_resumed = false;  // an interrupted resize was finished
  std::uint64_t items = 0;      // keys in the table afterwards
};

// A read-only consistency check of the persistent table (host scan).
struct gphash_check {
  bool ok = false;
  std::uint64_t items = 0;
  std::uint64_t duplicates = 0;       // keys stored more than once
  std::uint64_t inserting_slots = 0;  // slots in state INSERTING (only after a crash)
  std::vector<std::string> problems;  // bad value offsets, torn slots, ...
};

struct gphash_stats {
  std::uint32_t top_level = 0;
  std::uint32_t level_count = 0;
  std::uint64_t buckets = 0;      // over the live levels
  std::uint64_t slots = 0;        // capacity in keys
  std::uint64_t value_cells = 0;  // capacity of the value area
  std::uint64_t resizes = 0;      // levels added over the table's life
  bool cache_enabled = false;
  std::uint64_t cached_buckets = 0;
  // Slot reads of probes since the cache was enabled (or rebuilt by a resize or recovery):
  // served by the cache, and read from the pool.
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  // The value cache (cache_options::value_cache_limit): its GPU memory (0: values are not
  // cached), and since the cache was enabled (or rebuilt) the finds whose value it served, and
  // those whose valid copy came from the cache but whose value was read from the pool because a
  // writer changed the slot meanwhile (fallbacks).
  std::uint64_t value_cache_bytes = 0;
  std::uint64_t value_cache_hits = 0;
  std::uint64_t value_cache_fallbacks = 0;
  // GPU memory of the fingerprint mirror (0: gphash_options::fingerprint_mirror is off).
  std::uint64_t fingerprint_mirror_bytes = 0;
  // GPU memory of the update generations (0: gphash_options::combine_updates is off).
  std::uint64_t update_generation_bytes = 0;
};

template <class Key>
class gphash {
 public:
  using key_type = Key;
  using ref_type = gphash_ref<Key>;

  // Creates the table as named objects `name`, `name`.L<level> and `name`.V<n> in `pool`, which
  // must outlive the table (and its refs). Throws gpm::error: invalid_argument (bad geometry), already_exists, out_of_memory (pool full).
  static gphash create(pool& pool, const std::string& name, const gphash_config& config = {},
                       const gphash_options& options = {});
  // Opens the table, validating its header (magic, version, key size, geometry, checksum) and
  // state record, then runs recover(). Throws not_found, corrupt, version, invalid_argument (the
  // table holds another key type).
  static gphash open(pool& pool, const std::string& name, const gphash_options& options = {});
  // Frees every object of the table (also of one whose create or remove a crash cut short), and
  // no other object. Throws not_found (no such table), invalid_argument (`name` is another kind
  // of object), busy (the table is open in this process); then nothing is freed.
  static void remove(pool& pool, const std::string& name);

  // A table moved from is empty: every member but assignment and the destructor throws
  // invalid_argument.
  gphash(gphash&&) noexcept;
  gphash& operator=(gphash&&) noexcept;
  ~gphash();

  ref_type ref() const;
  const gphash_config& config() const;
  const gphash_options& options() const;

  // Bulk operations (see the top of this file). `status` may be null; so may `values_out`.
  void insert(const Key* keys, const void* values, std::size_t n, hash_status* status,
              cudaStream_t stream = nullptr);
  void upsert(const Key* keys, const void* values, std::size_t n, hash_status* status,
              cudaStream_t stream = nullptr);
  void update(const Key* keys, const void* values, std::size_t n, hash_status* status,
              cudaStream_t stream = nullptr);
  void find(const Key* keys, std::size_t n, void* values_out, hash_status* status,
            cudaStream_t stream = nullptr) const;
  void erase(const Key* keys, std::size_t n, hash_status* status, cudaStream_t stream = nullptr);

  // Displacement, for inserts made through ref() that returned `full`: moves items of the keys'
  // candidate buckets to other candidate slots of their own, so that a retry of the inserts finds
  // room; returns the number of items moved (0: no room can be made, resize() instead). `keys`
  // in GPU memory. Synchronous. Nothing else may use the table meanwhile (a move must not run
  // beside an update or erase of the item it moves). The bulk inserts do this themselves.
  std::uint64_t make_room(const Key* keys, std::size_t n, cudaStream_t stream = nullptr);

  // Makes the value cells retired by updates and erases reusable, in stream order: enqueue it
  // on `stream` after the kernels that used ref(), and only kernels that follow it reuse the
  // cells. The bulk operations call it themselves.
  void reclaim(cudaStream_t stream = nullptr);

  // Adds a level on top (2x the buckets of the current top) and rehashes the bottom level's
  // items into the others with warp-cooperative kernels; resumable after a crash. Throws
  // out_of_memory when the pool cannot hold the new level.
  void resize();
  // Clears INSERTING slots on every level, finishes an interrupted resize, removes duplicates,
  // rebuilds the volatile state (value allocator, cache, fingerprint mirror). Idempotent.
  gphash_recovery recover();
  const gphash_recovery& last_recovery() const;

  std::uint64_t size() const;      // keys stored (a scan)
  std::uint64_t capacity() const;  // slots over the live levels
  double load_factor() const;      // size() / capacity()
  gphash_stats stats() const;
  // Also reports a fingerprint mirror word that differs from the pool's (mirror on).
  gphash_check check() const;

  // BktCache. enable_cache() allocates the cache and loads it; reload_cache() re-chooses the hot
  // buckets and fetches them on a second stream, concurrently with operations.
  void enable_cache(const cache_options& options = {});
  void disable_cache();
  bool cache_enabled() const;
  void reload_cache();
  void wait_cache_reload() const;  // waits for an asynchronous reload to finish

  struct impl;

 private:
  explicit gphash(std::unique_ptr<impl> impl);
  impl& self() const;  // throws invalid_argument once moved from
  std::unique_ptr<impl> impl_;
};

extern template class gphash<std::uint64_t>;
extern template class gphash<key32>;
extern template class gphash<varkey>;

}  // namespace gpm
