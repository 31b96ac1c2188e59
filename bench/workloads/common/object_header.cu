// Writing and validating object_header (object_header.hpp).
#include "workloads/common/object_header.hpp"

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpmbench {

namespace {
std::uint64_t checksum_of(const object_header& h) {
  return gpm::checksum64(&h, offsetof(object_header, checksum));
}
}  // namespace

std::uint64_t create_with_header(gpm::pool& p, std::string_view name, std::uint64_t data_bytes,
                                 std::uint64_t magic, std::uint64_t version,
                                 const std::uint64_t (&sizes)[3]) {
  const std::uint64_t offset = p.allocate(name, kObjectHeaderBytes + data_bytes, 128);
  object_header h{magic, version, {sizes[0], sizes[1], sizes[2]}, 0};
  h.checksum = checksum_of(h);
  auto* at = p.host_ptr<object_header>(offset);
  *at = h;
  gpm::write_back(at, sizeof h);
  return offset;
}

object_header read_header(const gpm::pool& p, std::string_view name, std::uint64_t magic,
                          std::uint64_t version, std::string_view what, std::uint64_t& offset,
                          std::uint64_t& object_bytes) {
  const gpm::pool_object o = p.get(name);
  const std::string where = "pool object '" + std::string(name) + "'";
  if (o.bytes < kObjectHeaderBytes) {
    gpm::throw_error(gpm::errc::corrupt, where + " is " + std::to_string(o.bytes) +
                                             " bytes, too small to hold a " + std::string(what) +
                                             " header; recreate it");
  }
  const object_header h = *p.host_ptr<object_header>(o.offset);
  if (h.magic != magic) {
    gpm::throw_error(gpm::errc::layout_mismatch,
                     where + " is not a " + std::string(what) + " (wrong magic number)");
  }
  if (h.checksum != checksum_of(h)) {
    gpm::throw_error(gpm::errc::corrupt, where + ": the " + std::string(what) +
                                             " header fails its checksum; recreate it");
  }
  if (h.version != version) {
    gpm::throw_error(gpm::errc::version,
                     where + " holds " + std::string(what) + " format version " +
                         std::to_string(h.version) + ", this build reads version " +
                         std::to_string(version) + "; recreate it with this build");
  }
  offset = o.offset;
  object_bytes = o.bytes;
  return h;
}

void require_fits(std::string_view name, std::string_view what, std::uint64_t object_bytes,
                  std::uint64_t needed) {
  if (needed > object_bytes) {
    gpm::throw_error(gpm::errc::corrupt, "pool object '" + std::string(name) + "': its " +
                                             std::string(what) + " header names " +
                                             std::to_string(needed) + " bytes but the object has " +
                                             std::to_string(object_bytes) + "; recreate it");
  }
}

}  // namespace gpmbench
