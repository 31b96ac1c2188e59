// The on-media format of a gpmkit pool, version 2.0 (docs/format.md describes it for humans).
// Everything in a pool is position independent: structures refer to each other by byte offsets
// from the start of the pool. All integers are little-endian. Only src/pool and tools that
// inspect pools (the CLI, format tests) include this header; programs use gpm::pool.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/pool/object_header.hpp>

namespace gpm::format::pool {

inline constexpr std::size_t kPageBytes = 4096;

// Fixed regions: [0, 4096) header, [4096, 8192) root records, then the directory, then the heap.
inline constexpr std::uint64_t kHeaderOffset = 0;
inline constexpr std::uint64_t kRootOffset = 4096;
inline constexpr std::uint64_t kRootSlotBytes = 256;
inline constexpr std::uint64_t kDirectoryOffset = 8192;
inline constexpr std::uint64_t kEntryBytes = 128;
inline constexpr std::size_t kNameMax = 63;    // bytes of a name, without its terminating NUL
inline constexpr std::size_t kLayoutMax = 63;  // bytes of a layout name
inline constexpr std::uint64_t kMinAlignment = 128;

// Page 0, immutable after creation: the common header (magic "GPMKPOOL"; object_bytes is the
// file's size), then the pool's own fields. Its checksum covers the whole 4 KiB page (header_bytes
// is the page), so a flipped bit anywhere in the page is detected.
struct header {
  object_header common;
  char layout[kLayoutMax + 1];  // NUL-terminated, NUL-padded
  std::uint32_t page_bytes;     // 4096
  std::uint32_t directory_capacity;
  std::uint64_t root_offset;
  std::uint64_t directory_offset;
  std::uint64_t heap_offset;
  std::uint64_t heap_bytes;
};
static_assert(sizeof(header) == 168 && offsetof(header, common) == 0);

// Version 2.0: the common object header replaced 1.0's own magic, version, feature and uuid
// fields (and its compat and ro_compat feature words, which no version used).
inline constexpr object_kind kKind{
    "gpmkit pool", {'G', 'P', 'M', 'K', 'P', 'O', 'O', 'L'}, 2, 0, kPageBytes};

// The directory operation that was in flight when a root record was written; recovery finishes
// or undoes it. Allocation and free are crash-atomic because of it (docs/format.md).
enum pending_op : std::uint32_t { op_none = 0, op_allocate = 1, op_free = 2 };

inline constexpr std::uint32_t kFlagCleanShutdown = 1u << 0;

// Two slots at kRootOffset. Updates write the slot not holding the newest record, with seq + 1;
// the valid slot with the highest seq is the root. The checksum covers the 256-byte slot.
struct root_record {
  std::uint64_t seq;
  std::uint32_t flags;
  std::uint32_t pending;        // pending_op
  std::uint64_t pending_entry;  // directory index the pending operation touches
  std::uint64_t user_root_offset;
  std::uint64_t user_root_bytes;
  std::uint64_t open_count;
  std::uint64_t last_open_ns;
  std::uint8_t reserved[kRootSlotBytes - 8 * 8];
  std::uint64_t checksum;
};
static_assert(sizeof(root_record) == kRootSlotBytes);

inline constexpr std::uint64_t kEntryLive = 0x004a424f4556494cull;  // "LIVEOBJ\0"

// A named object. An all-zero entry is free; any other entry must be live and carry a valid
// checksum (seeded with its generation), or the pool is corrupt.
struct directory_entry {
  char name[kNameMax + 1];  // NUL-terminated, NUL-padded
  std::uint64_t offset;     // from the start of the pool
  std::uint64_t bytes;      // as requested
  std::uint64_t extent;     // bytes reserved in the heap (bytes rounded up to the alignment)
  std::uint64_t alignment;
  std::uint64_t generation;  // root seq when allocated
  std::uint64_t state;       // kEntryLive
  std::uint64_t type_tag;    // free for the owner of the object
  std::uint64_t checksum;
};
static_assert(sizeof(directory_entry) == kEntryBytes);

inline std::uint64_t directory_bytes(std::uint32_t capacity) {
  const std::uint64_t raw = static_cast<std::uint64_t>(capacity) * kEntryBytes;
  return (raw + kPageBytes - 1) / kPageBytes * kPageBytes;
}

}  // namespace gpm::format::pool
