// The header every persistent structure of the gpKVS and gpDB workloads starts with: magic,
// format version, three sizes and a checksum, so that opening a pool object validates it (and a
// foreign, damaged or old object is an error that says so, never data that is used). One helper,
// shared by the KVS table, the DB table and the undo logs' batch records.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <gpm/pool/pool.hpp>

namespace gpmbench {

struct object_header {
  std::uint64_t magic;
  std::uint64_t version;
  std::uint64_t sizes[3];  // what they mean is the structure's business
  std::uint64_t checksum;  // of the fields above
};
inline constexpr std::uint64_t kObjectHeaderBytes = 128;  // data starts one line after the header

// Allocates the pool object `name` of kObjectHeaderBytes + data_bytes (zero-filled), writes and
// persists its header, and returns the object's offset. Errors as gpm::pool::allocate, and
// invalid_argument for a zero size.
std::uint64_t create_with_header(gpm::pool& p, std::string_view name, std::uint64_t data_bytes,
                                 std::uint64_t magic, std::uint64_t version,
                                 const std::uint64_t (&sizes)[3]);

// Finds the object `name` and validates its header: errc::not_found, layout_mismatch (another
// magic: `what` names the structure expected), version, corrupt (checksum, or an object too small
// for data_bytes(sizes)). Returns the header; the object's offset goes to `offset`.
template <class DataBytes>
object_header open_with_header(const gpm::pool& p, std::string_view name, std::uint64_t magic,
                               std::uint64_t version, std::string_view what, std::uint64_t& offset,
                               DataBytes data_bytes);

// The non-template part of open_with_header.
object_header read_header(const gpm::pool& p, std::string_view name, std::uint64_t magic,
                          std::uint64_t version, std::string_view what, std::uint64_t& offset,
                          std::uint64_t& object_bytes);
void require_fits(std::string_view name, std::string_view what, std::uint64_t object_bytes,
                  std::uint64_t needed);

template <class DataBytes>
object_header open_with_header(const gpm::pool& p, std::string_view name, std::uint64_t magic,
                               std::uint64_t version, std::string_view what, std::uint64_t& offset,
                               DataBytes data_bytes) {
  std::uint64_t object_bytes = 0;
  const object_header h = read_header(p, name, magic, version, what, offset, object_bytes);
  require_fits(name, what, object_bytes, kObjectHeaderBytes + data_bytes(h.sizes));
  return h;
}

}  // namespace gpmbench
