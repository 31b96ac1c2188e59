// The on-media format of a GPHash table's header object (named `<table>` in its pool), version
// 3.0: an immutable header (the common object header, then key size and geometry) and a
// double-buffered, checksummed state record with a sequence number (which levels are live, whether
// a resize is running, the value-area segments). Levels are pool objects `<table>.L<level>`, value
// segments `<table>.V<n>`. Host code only; see docs/gphash.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <gpm/pool/object_header.hpp>

namespace gpm::format::hash {

inline constexpr std::uint64_t kTypeTag = 0x6770686173680001ull;  // pool type tag of all objects
inline constexpr std::uint32_t kMaxTop = 40;
inline constexpr std::uint32_t kStateSegments = 48;
inline constexpr std::uint32_t kMaxValueBytes = 65536;  // gphash_config::value_bytes
inline constexpr std::uint32_t kMaxKeyBytes = 4096;     // gphash_config::max_key_bytes

struct table_header {
  object_header common;     // magic "GPMHASH\0"; object_bytes: the whole table_record
  std::uint32_t key_bytes;  // 8, 32, or 0: variable-length keys of up to max_key_bytes
  std::uint32_t slot_bytes;
  std::uint32_t hash_count;
  std::uint32_t level_count;
  std::uint32_t slots_per_bucket;
  std::uint32_t value_bytes;
  std::uint32_t initial_top;
  std::uint32_t max_key_bytes;  // variable-length keys; 0 for fixed keys
  std::uint64_t seed;
  std::uint64_t reserved[3];
};
static_assert(sizeof(table_header) == 128 && offsetof(table_header, common) == 0);

// Version 3.0 put the common object header first; 2.0 grouped a bucket's words by number (the
// bucket layout is unchanged since).
inline constexpr object_kind kKind{
    "GPHash table", {'G', 'P', 'M', 'H', 'A', 'S', 'H', '\0'}, 3, 0, sizeof(table_header)};

struct table_state {
  std::uint64_t seq;
  std::uint32_t top;       // top level
  std::uint32_t resizing;  // 1: level top was added, level top - level_count is being drained
  std::uint32_t segments;
  std::uint32_t reserved;
  std::uint64_t resizes;
  std::uint64_t level_offset[kMaxTop + 1];  // by level number; 0: not allocated
  std::uint64_t seg_offset[kStateSegments];
  std::uint64_t seg_cells[kStateSegments];
  std::uint64_t checksum;  // over everything above
};
static_assert(sizeof(table_state) == 1136);

struct table_record {
  table_header header;
  table_state state[2];
};
static_assert(sizeof(table_record) == 2400);

// Checks the geometry of the table's header object at `record` (its common header validated by
// pool::open_object) for a table of `key_bytes` keys (0: variable length); throws gpm::error
// (corrupt, invalid_argument) naming `what`.
void check_table_geometry(const void* record, std::uint32_t key_bytes, const std::string& what);
// The newer valid state record; throws errc::corrupt when neither is valid.
table_state read_state(const table_record& r, const std::string& what);
// Writes `s` (with the next sequence number) into the older slot and persists it: crash-atomic.
void write_state(table_record& r, table_state s);
std::uint64_t state_checksum(const table_state& s);

}  // namespace gpm::format::hash
