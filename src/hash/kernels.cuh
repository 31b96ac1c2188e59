// GPHash's internal kernels over the table (bulk operations, recovery scans, rehash; all
// templates, so any file of src/hash may include this) and the launch shape its host code uses.
// The value area's reclaim kernel and BktCache's reload kernels live with their owners
// (value_area.cu, bucket_cache.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include <gpm/hash/gphash_ref.cuh>
#include <gpm/platform/kernel.cuh>

namespace gpm::detail::hash {

inline constexpr std::uint32_t kScanBlocks = 1024;
inline constexpr std::uint32_t kScanThreads = 256;

inline std::uint32_t blocks_for(std::uint64_t threads, std::uint32_t block) {
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>((threads + block - 1) / block, 1, kScanBlocks * 4));
}

enum class bulk_op { insert, upsert, update, find, erase };

constexpr const char* to_string(bulk_op op) {
  switch (op) {
    case bulk_op::insert: return "insert";
    case bulk_op::upsert: return "upsert";
    case bulk_op::update: return "update";
    case bulk_op::find: return "find";
    case bulk_op::erase: return "erase";
  }
  return "?";
}

struct bulk_args {
  const void* keys;
  const std::byte* values;
  std::byte* out;
  hash_status* status;
  std::uint64_t n;
  const std::uint64_t* index;  // when set, item i is keys[index[i]]
  std::uint64_t* retry;        // insert/upsert: indices that found no slot or value cell
  unsigned long long* retry_count;
};

template <class Key, unsigned G, bulk_op Op>
__global__ void bulk_kernel(table_view v, bulk_args a) {
  const auto tile = make_tile<G>();
  const Key* keys = static_cast<const Key*>(a.keys);
  for (std::uint64_t i : grid_stride<G>(a.n)) {
    const std::uint64_t k = a.index != nullptr ? a.index[i] : i;
    const Key key = keys[k];
    const std::uint64_t at = k * v.value_bytes;  // values are packed: value_bytes each
    hash_status st;
    if constexpr (Op == bulk_op::insert) {
      st = insert<Key>(v, tile, key, a.values + at, insert_mode::insert);
    } else if constexpr (Op == bulk_op::upsert) {
      st = insert<Key>(v, tile, key, a.values + at, insert_mode::upsert);
    } else if constexpr (Op == bulk_op::update) {
      st = update<Key>(v, tile, key, a.values + at);
    } else if constexpr (Op == bulk_op::find) {
      st = find<Key>(v, tile, key, a.out != nullptr ? a.out + at : nullptr);
    } else {
      st = erase<Key>(v, tile, key);
    }
    if (tile.thread_rank() == 0) {
      if (a.status != nullptr) a.status[k] = st;
      // Out of slots, or out of value cells because other inserts in flight held them: both are
      // retried after a resize, which adds slots and value cells.
      if ((st == hash_status::full || st == hash_status::no_value_space) && a.retry != nullptr) {
        a.retry[atomicAdd(a.retry_count, 1ull)] = k;
      }
    }
  }
}

// Displacement: a tile per key (keys[index[i]]) of an insert that found no room; counts the
// items moved in `moved`.
template <class Key, unsigned G>
__global__ void make_room_kernel(table_view v, const void* keys, const std::uint64_t* index,
                                 std::uint64_t n, unsigned long long* moved) {
  const auto tile = make_tile<G>();
  for (std::uint64_t i : grid_stride<G>(n)) {
    const Key key = static_cast<const Key*>(keys)[index != nullptr ? index[i] : i];
    if (make_room<Key>(v, tile, key) == room::made && tile.thread_rank() == 0) {
      atomicAdd(moved, 1ull);
    }
  }
}

// One level's slots, one per thread: clears INSERTING slots left by a crash (recovery), counts
// published items, and marks the value cells they reference (allocator rebuild).
enum class scan_op { clear_inserting, count_items, mark_cells };

template <scan_op Op>
__global__ void scan_kernel(table_view v, std::uint32_t level, unsigned long long* count) {
  const std::uint64_t slots = (1ull << level) * v.slots;
  for (std::uint64_t i : grid_stride(slots)) {
    const slot_ref slot = slot_at(v, level, i / v.slots, static_cast<std::uint32_t>(i % v.slots));
    const std::uint64_t word = load_word(&slot[0]);
    if constexpr (Op == scan_op::clear_inserting) {
      // Not persisted: a durable INSERTING is only ever cleared again by the next recovery (no
      // reader gives it a meaning), and the slot's next insert persists the word as it publishes.
      if (word == kInserting) {
        atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
        atomicAdd(count, 1ull);
      }
    } else if constexpr (Op == scan_op::count_items) {
      if (is_published(word)) atomicAdd(count, 1ull);
    } else {
      if (!is_published(word)) continue;
      const std::uint64_t cell = cell_of(v, load_word(&slot[1]));
      if (cell == kNone) {
        atomicAdd(count, 1ull);  // a value offset outside the value area: corruption
      } else {
        atomicOr(reinterpret_cast<unsigned long long*>(&v.bitmap[cell / 64]),
                 static_cast<unsigned long long>(1ull << (cell % 64)));
      }
    }
  }
}

// Recovery: a published copy that is not the valid copy of its key (a crash inside a rehash or a
// move, or a table written before concurrent inserts of a key were kept apart) is cleared. The
// valid copy is never cleared, so one pass in parallel suffices. One warp per slot.
template <class Key>
__global__ void dedupe_kernel(table_view v, std::uint32_t level, unsigned long long* removed) {
  const auto tile = make_tile<32>();
  const std::uint64_t slots = (1ull << level) * v.slots;
  for (std::uint64_t i : grid_stride<32>(slots)) {
    const std::uint64_t bucket = i / v.slots;
    const auto s = static_cast<std::uint32_t>(i % v.slots);
    const slot_ref slot = slot_at(v, level, bucket, s);
    const slot_image img = load_slot<Key>(slot);
    if (!is_published(img.word)) continue;
    const Key key = key_ops<Key>::key_at(v, img);
    const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
    const probe_result r = probe(v, tile, key, h, img.word, false);
    if (r.match != copy_rank(level, bucket, s) && tile.thread_rank() == 0) {
      atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
      // Durable before the operations that follow: once they erase or update the valid copy,
      // a duplicate that survived a crash would bring back the old item.
      persist_at(v, "gphash.recover.dedupe", &slot[0], sizeof slot[0]);
      atomicAdd(removed, 1ull);
    }
  }
}

// Resize: moves every item of the drained bottom level into the levels above it (`upper`
// addresses the new top and excludes the bottom). An item is inserted above (or found there,
// when a crash interrupted an earlier rehash of it), then cleared below: after a crash it is in
// one place or both, never lost. One warp per slot (warp-cooperative rehash). counts[0]: items
// that found no slot above; counts[1]: items found above already, whose copy below was thus a
// duplicate left by a crash.
template <class Key>
__global__ void rehash_kernel(table_view upper, table_view all, std::uint32_t bottom,
                              unsigned long long* counts) {
  const auto tile = make_tile<32>();
  const std::uint64_t slots = (1ull << bottom) * all.slots;
  for (std::uint64_t i : grid_stride<32>(slots)) {
    const std::uint64_t bucket = i / all.slots;
    const auto s = static_cast<std::uint32_t>(i % all.slots);
    const slot_ref slot = slot_at(all, bottom, bucket, s);
    const slot_image img = load_slot<Key>(slot);
    if (!is_published(img.word)) continue;
    const hash_status st = insert<Key>(upper, tile, key_ops<Key>::key_at(all, img), nullptr,
                                       insert_mode::rehash, img.value);
    if (tile.thread_rank() == 0) {
      if (st == hash_status::inserted || st == hash_status::exists) {
        kernel_crash_point(all.crash, "gphash.rehash.copied");
        // Not persisted: until the resize commits, recovery resumes the rehash, which finds the
        // copy above and clears this one again; once it commits, the level is dropped and freed.
        atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
        if (st == hash_status::exists) atomicAdd(&counts[1], 1ull);
      } else {
        atomicAdd(&counts[0], 1ull);
      }
    }
  }
}

}  // namespace gpm::detail::hash
