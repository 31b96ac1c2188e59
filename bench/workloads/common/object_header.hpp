// The header every persistent structure of the gpKVS and gpDB workloads starts with: gpmkit's
// common object header (include/gpm/pool/object_header.hpp: magic, version, sizes, identity,
// checksum) and three sizes whose meaning is the structure's business, so that opening a pool
// object validates it (a foreign, damaged or old object is an error that says so, never data
// that is used). One helper, shared by the KVS table, the DB table, the flat undo log and the
// CAP copy selector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <gpm/pool/object_header.hpp>
#include <gpm/pool/pool.hpp>

namespace gpmbench {

struct object_header {
  gpm::format::object_header common;
  std::uint64_t sizes[3];
};
static_assert(sizeof(object_header) == 88 && offsetof(object_header, common) == 0);
inline constexpr std::uint64_t kObjectHeaderBytes = 128;  // data starts one line after the header

// A benchmark structure's kind: its noun, magic and version; the header size is always ours.
// Version 2.0 moved these structures onto the common header; their magic bytes are 1.0's, so an
// object written by 1.0 is refused as older, not as foreign.
constexpr gpm::format::object_kind bench_kind(std::string_view noun, const char (&magic)[9]) {
  return {noun,
          {magic[0], magic[1], magic[2], magic[3], magic[4], magic[5], magic[6], magic[7]},
          2,
          0,
          sizeof(object_header)};
}

// Allocates the pool object `name` of kObjectHeaderBytes + data_bytes (zero-filled), writes and
// persists its header, and returns the object's offset. Errors as gpm::pool::allocate, and
// invalid_argument for a zero size.
std::uint64_t create_with_header(gpm::pool& p, std::string_view name, std::uint64_t data_bytes,
                                 const gpm::format::object_kind& kind,
                                 const std::uint64_t (&sizes)[3]);

// Finds the object `name` and validates its header (gpm::format::validate_header: not_found,
// corrupt, version), then that the object holds data_bytes(sizes) after the header (corrupt).
// Returns the header; the object's offset goes to `offset`.
template <class DataBytes>
object_header open_with_header(const gpm::pool& p, std::string_view name,
                               const gpm::format::object_kind& kind, std::uint64_t& offset,
                               DataBytes data_bytes);

// The non-template parts of open_with_header.
object_header read_header(const gpm::pool& p, std::string_view name,
                          const gpm::format::object_kind& kind, std::uint64_t& offset,
                          std::uint64_t& object_bytes);
void require_fits(std::string_view name, std::string_view what, std::uint64_t object_bytes,
                  std::uint64_t needed);

template <class DataBytes>
object_header open_with_header(const gpm::pool& p, std::string_view name,
                               const gpm::format::object_kind& kind, std::uint64_t& offset,
                               DataBytes data_bytes) {
  std::uint64_t object_bytes = 0;
  const object_header h = read_header(p, name, kind, offset, object_bytes);
  require_fits(name, kind.noun, object_bytes, kObjectHeaderBytes + data_bytes(h.sizes));
  return h;
}

}  // namespace gpmbench
