// Writing and validating object_header (object_header.hpp).
#include "workloads/common/object_header.hpp"

#include <string>

#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>

namespace gpmbench {

std::uint64_t create_with_header(gpm::pool& p, std::string_view name, std::uint64_t data_bytes,
                                 const gpm::format::object_kind& kind,
                                 const std::uint64_t (&sizes)[3]) {
  const std::uint64_t bytes = kObjectHeaderBytes + data_bytes;
  const std::uint64_t offset = p.allocate(name, bytes, 128);
  object_header h{gpm::format::make_header(kind, bytes), {sizes[0], sizes[1], sizes[2]}};
  gpm::format::seal_header(&h);
  auto* at = p.host_ptr<object_header>(offset);
  *at = h;
  gpm::write_back(at, sizeof h);
  return offset;
}

object_header read_header(const gpm::pool& p, std::string_view name,
                          const gpm::format::object_kind& kind, std::uint64_t& offset,
                          std::uint64_t& object_bytes) {
  const std::string what = std::string(kind.noun) + " '" + std::string(name) + "'";
  const gpm::pool_object o = p.open_object(name, kind, what);
  offset = o.offset;
  object_bytes = o.bytes;
  return *p.host_ptr<object_header>(o.offset);
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
