// The on-media format of a GPHash table's header object (named `<table>` in its pool): an
// immutable header (magic, version, key size, geometry, checksum) and a double-buffered,
// checksummed state record with a sequence number (which levels are live, whether a resize is
// running, the value-area segments). Levels are pool objects `<table>.L<level>`, value segments
// `<table>.V<n>`. Host code only; see docs/gphash.md.
#pragma once

#include <cstdint>
#include <string>

namespace gpm::detail::hash {

inline constexpr char kMagic[8] = {'G', 'P', 'M', 'H', 'A', 'S', 'H', '\0'};
inline constexpr std::uint16_t kMajor = 2;  // 2: bucket words grouped by word number
inline constexpr std::uint16_t kMinor = 0;
inline constexpr std::uint64_t kTypeTag = 0x6770686173680001ull;  // pool type tag of all objects
inline constexpr std::uint32_t kMaxTop = 40;
inline constexpr std::uint32_t kStateSegments = 48;

struct table_header {
  char magic[8];
  std::uint16_t major;
  std::uint16_t minor;
  std::uint32_t key_bytes;  // 8, 32, or 0: variable-length keys of up to max_key_bytes
  std::uint32_t slot_bytes;
  std::uint32_t hash_count;
  std::uint32_t level_count;
  std::uint32_t slots_per_bucket;
  std::uint32_t value_bytes;
  std::uint32_t initial_top;
  std::uint32_t max_key_bytes;  // variable-length keys; 0 for fixed keys
  std::uint32_t reserved;
  std::uint64_t seed;
  std::uint64_t created_ns;
  std::uint64_t checksum;  // over everything above
};

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

struct table_record {
  table_header header;
  std::uint64_t pad[7];
  table_state state[2];
};

// Validates the header for a table of `key_bytes` keys (0: variable length); throws gpm::error
// (corrupt, version, invalid_argument) naming `what`.
void validate_header(const table_header& h, std::uint32_t key_bytes, const std::string& what);
void seal_header(table_header& h);
// The newer valid state record; throws errc::corrupt when neither is valid.
table_state read_state(const table_record& r, const std::string& what);
// Writes `s` (with the next sequence number) into the older slot and persists it: crash-atomic.
void write_state(table_record& r, table_state s);
std::uint64_t state_checksum(const table_state& s);

}  // namespace gpm::detail::hash
