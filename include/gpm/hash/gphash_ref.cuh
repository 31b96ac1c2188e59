// gpm::gphash_ref<Key>: the trivially copyable device view of a GPHash table (gphash.cuh), which
// kernels take by value. Every operation is lock-free and log-free (GPHash, FAST'25, §3.2): a slot
// is claimed by CAS EMPTY->INSERTING, filled, persisted, then published by storing its
// fingerprint, persisted again; updates write a new value cell and CAS the slot's value offset;
// deletes CAS the fingerprint back to EMPTY. Operations take a cooperative-group tile whose size
// (1, 2, 4, 8, 16 or 32) is a template parameter; size 1 is the per-thread path, 32 the paper's
// one-shot warp access. Every lane of the tile must call with the same key and gets the same
// status back.
//
//   __global__ void lookup(gpm::gphash_ref<std::uint64_t> t, const std::uint64_t* keys, int n,
//                          std::byte* out, gpm::hash_status* st) {
//     auto tile = cg::tiled_partition<32>(cg::this_thread_block());
//     const int i = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
//     if (i < n) {
//       gpm::hash_status s = t.find(tile, keys[i], out + std::size_t(i) * t.value_bytes());
//       if (tile.thread_rank() == 0) st[i] = s;
//     }
//   }
//
// Never call a device operation while the host object resizes or recovers the table. Value
// cells freed by update and erase are reused only after gphash::reclaim() (the bulk host
// operations call it), so a reader concurrent with a writer never sees a reused cell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <gpm/platform/macros.hpp>

namespace gpm {

// A fixed 32-byte key, stored in place in the slot next to its 8-byte fingerprint.
struct key32 {
  std::uint64_t words[4];
  friend GPM_HOST_DEVICE bool operator==(const key32& a, const key32& b) {
    return a.words[0] == b.words[0] && a.words[1] == b.words[1] && a.words[2] == b.words[2] &&
           a.words[3] == b.words[3];
  }
};

// A variable-length key: `bytes` bytes at `data` (memory the caller's code can read: device
// memory in kernels). Stored by offset: the slot holds a fingerprint and the offset of a cell
// holding the key and the value, so keys up to gphash_config::max_key_bytes fit.
struct varkey {
  const void* data;
  std::uint32_t bytes;
};

// The per-key result of an operation (the WarpCore-style status channel of bulk operations).
enum class hash_status : std::uint8_t {
  inserted = 0,        // insert/upsert: the key was absent and is now stored
  updated = 1,         // update/upsert: the key's value was replaced
  found = 2,           // find: the key is present; its value was copied out
  erased = 3,          // erase: the key was present and is now gone
  not_found = 4,       // find/update/erase: the key is absent
  exists = 5,          // insert: the key is present already; nothing changed
  full = 6,            // insert/upsert: every candidate slot is taken (resize, then retry)
  no_value_space = 7,  // insert/update/upsert: the value area has no free cell (reclaim/resize)
  invalid_key = 8,     // the key is reserved (8-byte keys 2^64-2 and 2^64-1) or too long
};
const char* to_string(hash_status s) noexcept;

}  // namespace gpm

#include <gpm/hash/detail/engine.cuh>

namespace gpm {

template <class Key>
class gphash_ref {
  static_assert(std::is_same_v<Key, std::uint64_t> || std::is_same_v<Key, key32> ||
                    std::is_same_v<Key, varkey>,
                "GPHash keys are std::uint64_t, gpm::key32 or gpm::varkey");

 public:
  using key_type = Key;

  gphash_ref() = default;
  explicit gphash_ref(const detail::hash::table_view& view) : view_(view) {}

  // Bytes of one value (the table's configured value size).
  GPM_HOST_DEVICE std::uint32_t value_bytes() const { return view_.value_bytes; }

  // Stores key -> value (value_bytes() bytes at `value`) unless the key is present.
  // Returns inserted, exists, full, no_value_space or invalid_key.
  template <class Tile>
  __device__ hash_status insert(const Tile& tile, const Key& key, const void* value) const {
    return detail::hash::insert<Key>(view_, tile, key, value, detail::hash::insert_mode::insert);
  }
  // Stores key -> value whether or not the key is present: inserted or updated (or full,
  // no_value_space, invalid_key).
  template <class Tile>
  __device__ hash_status upsert(const Tile& tile, const Key& key, const void* value) const {
    return detail::hash::insert<Key>(view_, tile, key, value, detail::hash::insert_mode::upsert);
  }
  // Replaces the value of a present key out of place: updated, not_found, no_value_space,
  // invalid_key.
  template <class Tile>
  __device__ hash_status update(const Tile& tile, const Key& key, const void* value) const {
    return detail::hash::update<Key>(view_, tile, key, value);
  }
  // Copies the key's value to `value_out` (may be null): found, not_found or invalid_key.
  template <class Tile>
  __device__ hash_status find(const Tile& tile, const Key& key, void* value_out) const {
    return detail::hash::find<Key>(view_, tile, key, value_out);
  }
  // Removes the key (and any duplicate left by concurrent inserts): erased, not_found,
  // invalid_key.
  template <class Tile>
  __device__ hash_status erase(const Tile& tile, const Key& key) const {
    return detail::hash::erase<Key>(view_, tile, key);
  }

  // The per-thread path (cooperative-group size 1).
  __device__ hash_status insert(const Key& key, const void* value) const {
    return insert(single_thread{}, key, value);
  }
  __device__ hash_status upsert(const Key& key, const void* value) const {
    return upsert(single_thread{}, key, value);
  }
  __device__ hash_status update(const Key& key, const void* value) const {
    return update(single_thread{}, key, value);
  }
  __device__ hash_status find(const Key& key, void* value_out) const {
    return find(single_thread{}, key, value_out);
  }
  __device__ hash_status erase(const Key& key) const {
    return erase(single_thread{}, key);
  }

  const detail::hash::table_view& view() const { return view_; }

 private:
  detail::hash::table_view view_{};
};

// Kernels take the view by value.
static_assert(std::is_trivially_copyable_v<gphash_ref<std::uint64_t>>);

}  // namespace gpm
