// The GPHash adapter of the YCSB runner: gpm::gphash (include/gpm/hash) behind the runner's index
// interface (clear, execute). A batch of mixed operations runs in one kernel of cooperative-group
// tiles over the table's device view, one operation per tile, as the paper's GPU-side batches do.
// The factor analysis's switches: the tile size (1: per-thread, 32: one-shot warp access), keys in
// place or out of place (a gpm::varkey table: the slot holds a fingerprint and the key lives in the
// value cell), and the bucket cache. The ceiling is the same table copied to GPU memory and run
// with persistence off. Read-modify-write is a find and an update by the same tile (as a YCSB
// client does it); the other operations map to one GPHash operation each.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <gpm/hash/gphash.cuh>
#include <gpm/platform/kernel.cuh>

#include "gpmbench/resources.hpp"
#include "workloads/ycsb/kv_format.cuh"

namespace gpmbench::ycsb {

// GPHash's key type for a benchmark key, and the conversion: the fixed-size key type, stored in
// place, or (InPlace false) a gpm::varkey over the key's bytes, stored out of place.
template <class Key, bool InPlace>
struct gphash_key_of {
  using type = gpm::varkey;
  static GPM_HOST_DEVICE type from(const Key& k) { return {&k, sizeof(Key)}; }
};
template <>
struct gphash_key_of<key8, true> {
  using type = std::uint64_t;
  static GPM_HOST_DEVICE type from(const key8& k) { return k.w[0]; }
};
template <>
struct gphash_key_of<key32, true> {
  using type = gpm::key32;
  static GPM_HOST_DEVICE type from(const key32& k) { return {{k.w[0], k.w[1], k.w[2], k.w[3]}}; }
};

// What the factor analysis, the cache sweep and the ceiling vary.
struct gphash_variant {
  unsigned cg_size = 32;  // 1 (per-thread) or 32 (warp-cooperative)
  bool in_place_keys = true;
  bool cache = true;
  // The ceiling: the table copied to GPU memory after creation, operations without persists.
  bool gpu_memory = false;
  gpm::cache_options cache_options{};
  // Operations between cache reloads (the cache is frozen in between; the first load follows
  // the load phase).
  std::uint64_t reload_every_ops = 4ull << 20;
  // make_room() moves items for inserts that found no room (gpm::gphash::make_room); off: the
  // paper's placement alone.
  bool displace = true;
  // gpm::gphash_options::fingerprint_mirror: fingerprint words read from GPU memory.
  bool fingerprint_mirror = gpm::gphash_options{}.fingerprint_mirror;
  // gpm::gphash_options::combine_updates: concurrent updates of one slot combined.
  bool combine_updates = gpm::gphash_options{}.combine_updates;
};

__device__ inline op_status from_gphash(gpm::hash_status s) {
  switch (s) {
    case gpm::hash_status::inserted:
    case gpm::hash_status::updated:
    case gpm::hash_status::found:
    case gpm::hash_status::erased: return op_status::ok;
    case gpm::hash_status::not_found: return op_status::not_found;
    case gpm::hash_status::exists: return op_status::duplicate;
    case gpm::hash_status::full:
    case gpm::hash_status::no_value_space: return op_status::full;
    case gpm::hash_status::invalid_key: return op_status::bad_value;
  }
  return op_status::bad_value;
}

// One operation per tile of Cg threads. A find copies the value with every lane of the tile, so
// a warp's tile reads it into the tile's slot of dynamic shared memory before every lane checks
// it; a one-thread tile uses its own local copy (and needs no shared memory).
// At most 64 registers a thread. Nsight Compute on an H200 (YCSB A, batches of 2^16, 8-byte keys
// in place, a warp per operation): 86 registers let 2 blocks of 256 threads share an SM (a
// quarter of its warps), and 97.5% of the scheduler cycles found no warp to issue, the warps
// waiting on memory barriers (the persists' system fences): a latency-bound kernel, which more
// warps in flight speed up. 64 registers spill 8-140 bytes (488 for 32-byte keys out of place,
// per thread) and fit 4 blocks.
template <class Key, class Value, bool InPlace, unsigned Cg>
__global__ void __maxnreg__(64)
    gphash_ops(gpm::gphash_ref<typename gphash_key_of<Key, InPlace>::type> table, const kv_op* ops,
               op_status* status, std::uint64_t* versions, std::uint64_t n) {
  const auto tile = cg::tiled_partition<Cg>(cg::this_thread_block());
  Value local;
  Value* buffer = Cg == 1 ? &local : gpm::dynamic_shared_memory<Value>() + threadIdx.x / Cg;
  for (std::uint64_t i : gpm::grid_stride<Cg>(n)) {
    const kv_op op = ops[i];
    const Key k = Key::from_id(op.key_id);
    const auto key = gphash_key_of<Key, InPlace>::from(k);
    std::uint64_t version = 0;
    op_status st = op_status::bad_value;
    const auto read = [&]() {
      const op_status s = from_gphash(table.find(tile, key, buffer));
      if (s != op_status::ok) return s;
      version = buffer->w[1];
      return buffer->belongs_to(op.key_id) ? op_status::ok : op_status::bad_value;
    };
    switch (op.kind) {
      case op_kind::find: st = read(); break;
      case op_kind::insert: {
        const Value v = Value::make(op.key_id, op.version);
        st = from_gphash(table.insert(tile, key, &v));
        break;
      }
      case op_kind::update: {
        const Value v = Value::make(op.key_id, op.version);
        st = from_gphash(table.update(tile, key, &v));
        break;
      }
      case op_kind::read_modify_write: {
        st = read();
        if (st != op_status::ok) break;
        const Value v = Value::make(op.key_id, version + op.version);
        st = from_gphash(table.update(tile, key, &v));
        break;
      }
      case op_kind::erase: st = from_gphash(table.erase(tile, key)); break;
    }
    if (tile.thread_rank() == 0) {
      status[i] = st;
      if (versions != nullptr) versions[i] = version;
    }
    tile.sync();  // the buffer is reused by the tile's next operation
  }
}

// The table's keys of operations ops[0, n): `raw` holds the benchmark keys that out-of-place
// (gpm::varkey) keys point into.
template <class Key, bool InPlace>
__global__ void keys_of_ops(const kv_op* ops, Key* raw,
                            typename gphash_key_of<Key, InPlace>::type* keys, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    raw[i] = Key::from_id(ops[i].key_id);
    keys[i] = gphash_key_of<Key, InPlace>::from(raw[i]);
  }
}

template <class Key, class Value = kv_value, bool InPlace = true>
class gphash_index {
 public:
  using key_type = Key;
  using value_type = Value;
  using table_key = typename gphash_key_of<Key, InPlace>::type;
  using table_type = gpm::gphash<table_key>;

  // A table whose top level makes `keys` keys fill at most 3/4 of the slots (2 levels, 8-way).
  static gpm::gphash_config config_for(std::uint64_t keys) {
    gpm::gphash_config c;
    c.value_bytes = sizeof(Value);
    c.max_key_bytes = sizeof(Key);
    std::uint32_t top = 1;
    while ((12ull << top) * 3 / 4 < keys) ++top;
    c.top_level = top;
    return c;
  }
  static std::uint64_t pool_bytes(std::uint64_t keys) {
    const std::uint64_t slots = 12ull << config_for(keys).top_level;
    const std::uint64_t slot_bytes = std::is_same_v<table_key, gpm::key32> ? 48 : 16;
    // An out-of-place key lives in front of the value: its length and its bytes.
    const std::uint64_t cell_bytes = sizeof(Value) + (InPlace ? 0 : 8 + (sizeof(Key) + 7) / 8 * 8);
    // Slots and GPHash's 1.5 value cells per slot, with room for its own records.
    return index_pool_bytes(slots * slot_bytes + (slots + slots / 2 + 64) * cell_bytes +
                            (4ull << 20));
  }

  // Creates an empty table for `keys` keys.
  gphash_index(gpm::pool& p, std::uint64_t keys, geometry launch, gphash_variant variant)
      : gphash_index(p, config_for(keys), launch, variant) {
    make();
  }
  // Opens (and so recovers) the table an earlier gphash_index left in `p`.
  static std::unique_ptr<gphash_index> open(gpm::pool& p, geometry launch, gphash_variant variant) {
    std::unique_ptr<gphash_index> x(new gphash_index(p, gpm::gphash_config{}, launch, variant));
    x->table_ = std::make_unique<table_type>(table_type::open(p, kName, x->options()));
    x->config_ = x->table_->config();
    if (variant.cache) x->table_->enable_cache(variant.cache_options);
    return x;
  }

  // A fresh, empty table (GPHash has no clear: the benchmark removes and recreates it).
  void clear() {
    table_.reset();
    table_type::remove(*pool_, kName);
    make();
  }

  // For inserts ops[0, n) that found no room: moves items so that they find it when executed
  // again (gpm::gphash::make_room, synchronous); returns the items moved, 0 with the variant's
  // displacement off.
  std::uint64_t make_room(const kv_op* ops, std::uint64_t n, cudaStream_t s) {
    if (!variant_.displace || n == 0) return 0;
    gpm::device_buffer<Key> raw(n);
    gpm::device_buffer<table_key> keys(n);
    gpm::launch(keys_of_ops<Key, InPlace>, 256, 256, 0, s, ops, raw.data(), keys.data(), n);
    return table_->make_room(keys.data(), n, s);
  }

  void execute(const kv_op* ops, op_status* status, std::uint64_t n, cudaStream_t s,
               std::uint64_t* versions = nullptr) {
    if (n == 0) return;
    const std::uint64_t per_block = launch_.threads / variant_.cg_size;
    std::uint64_t blocks = (n + per_block - 1) / per_block;
    const std::uint64_t shared = shared_bytes(launch_, variant_);
    // No more blocks than run at once: a later wave would wait for the first to finish.
    if (blocks > resident_blocks_) blocks = resident_blocks_;
    const gpm::gphash_ref<table_key> ref = variant_.gpu_memory ? ceiling_ref() : table_->ref();
    if (variant_.cg_size == 1) {
      gpm::launch(gphash_ops<Key, Value, InPlace, 1>, static_cast<unsigned>(blocks),
                  launch_.threads, shared, s, ref, ops, status, versions, n);
    } else {
      gpm::launch(gphash_ops<Key, Value, InPlace, 32>, static_cast<unsigned>(blocks),
                  launch_.threads, shared, s, ref, ops, status, versions, n);
    }
    // Cells retired by this batch's updates and erases become reusable once it is done.
    table_->reclaim(s);
    ops_since_reload_ += n;
    if (variant_.cache && ops_since_reload_ >= variant_.reload_every_ops) {
      table_->reload_cache();  // asynchronous: fetched on a second stream while batches run
      ops_since_reload_ = 0;
    }
  }

  // The runner calls this after the (untimed) load phase and warm-up read pass: the cache is
  // chosen anew from what they accessed, so the timed run starts from its hot set.
  void before_run() {
    if (!variant_.cache) return;
    table_->reload_cache();
    table_->wait_cache_reload();
    ops_since_reload_ = 0;
    run_start_ = table_->stats();
  }
  // ... and this after the timed run phase: the hit rate is the run's, not the checks' after it.
  void after_run() { run_end_ = table_->stats(); }

  table_type& table() { return *table_; }
  std::uint64_t slot_capacity() const { return table_->capacity(); }
  // The resizes, the fingerprint mirror's and the update generations' GPU memory (when on), and
  // over the last timed run phase the bucket cache's hit rate and the finds whose value the value
  // cache served or, their valid copy cached, left to the pool.
  named_values metrics() const {
    const gpm::gphash_stats now = table_->stats();
    named_values v{{"resizes", static_cast<double>(now.resizes)}};
    if (variant_.fingerprint_mirror) {
      v.push_back({"fingerprint_mirror_bytes", static_cast<double>(now.fingerprint_mirror_bytes)});
    }
    if (variant_.combine_updates) {
      v.push_back({"update_generation_bytes", static_cast<double>(now.update_generation_bytes)});
    }
    const auto in_run = [&](std::uint64_t gpm::gphash_stats::*count) {
      return run_end_.*count - run_start_.*count;
    };
    const std::uint64_t hits = in_run(&gpm::gphash_stats::cache_hits);
    const std::uint64_t misses = in_run(&gpm::gphash_stats::cache_misses);
    if (variant_.cache && hits + misses > 0) {
      v.push_back(
          {"cache_hit_rate", static_cast<double>(hits) / static_cast<double>(hits + misses)});
    }
    if (variant_.cache && run_end_.value_cache_bytes > 0) {
      v.push_back(
          {"value_cache_hits", static_cast<double>(in_run(&gpm::gphash_stats::value_cache_hits))});
      v.push_back({"value_cache_fallbacks",
                   static_cast<double>(in_run(&gpm::gphash_stats::value_cache_fallbacks))});
    }
    return v;
  }

 private:
  static constexpr const char* kName = "gphash";

  gphash_index(gpm::pool& p, const gpm::gphash_config& config, geometry launch,
               gphash_variant variant)
      : pool_(&p), config_(config), launch_(launch), variant_(variant) {
    gpm::require(variant.cg_size == 1 || variant.cg_size == 32,
                 "gphash_index: the tile size is 1 (per-thread) or 32 (warp-cooperative)");
    gpm::require(!(variant.gpu_memory && variant.cache),
                 "gphash_index: the GPU-memory ceiling has no bucket cache");
    gpm::require(launch.threads % 32 == 0, "gphash_index: blocks must be whole warps");
    const std::uint64_t shared = shared_bytes(launch, variant);
    const unsigned resident =
        variant.cg_size == 1
            ? gpm::resident_blocks(gphash_ops<Key, Value, InPlace, 1>, launch.threads, shared)
            : gpm::resident_blocks(gphash_ops<Key, Value, InPlace, 32>, launch.threads, shared);
    resident_blocks_ = std::min<std::uint64_t>(launch.blocks, resident);
  }

  // gphash_ops's dynamic shared memory: a value per warp tile (none for one-thread tiles).
  static std::uint64_t shared_bytes(const geometry& launch, const gphash_variant& variant) {
    return variant.cg_size == 1 ? 0 : launch.threads / variant.cg_size * sizeof(Value);
  }

  gpm::gphash_options options() const {
    gpm::gphash_options o;
    o.auto_resize = false;  // batches run through the device view, which never resizes
    o.block_threads = launch_.threads;
    o.cg_size = variant_.cg_size;
    o.fingerprint_mirror = variant_.fingerprint_mirror;
    o.combine_updates = variant_.combine_updates;
    return o;
  }

  void make() {
    table_ = std::make_unique<table_type>(table_type::create(*pool_, kName, config_, options()));
    if (variant_.cache) table_->enable_cache(variant_.cache_options);
    ops_since_reload_ = 0;
    if (variant_.gpu_memory) {
      // The whole pool image, so that the table's offsets hold; the value allocator and the
      // retired cells stay the table's own (GPU memory already).
      if (ceiling_.size() != pool_->size()) ceiling_ = gpm::device_buffer<char>(pool_->size());
      ceiling_.copy_from_host(pool_->host_ptr<char>(0), pool_->size());
    }
  }

  // The table's device view over the GPU-memory copy, with persists off.
  gpm::gphash_ref<table_key> ceiling_ref() const {
    gpm::detail::hash::table_view v = table_->ref().view();
    v.base = ceiling_.data();
    v.persistent = false;
    return gpm::gphash_ref<table_key>(v);
  }

  gpm::pool* pool_;
  gpm::gphash_config config_;
  geometry launch_;
  gphash_variant variant_;
  std::uint64_t resident_blocks_ = 0;  // of launch_.threads running gphash_ops at once, at most
                                       // launch_.blocks
  std::unique_ptr<table_type> table_;
  gpm::device_buffer<char> ceiling_;
  std::uint64_t ops_since_reload_ = 0;
  gpm::gphash_stats run_start_{}, run_end_{};
};

}  // namespace gpmbench::ycsb
