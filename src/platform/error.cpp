// gpm::error and the helpers that build it (see error.hpp).
#include <gpm/platform/error.hpp>

namespace gpm {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::out_of_memory: return "out_of_memory";
    case errc::cuda: return "cuda";
    case errc::io: return "io";
    case errc::corrupt: return "corrupt";
    case errc::version: return "version";
    case errc::layout_mismatch: return "layout_mismatch";
    case errc::busy: return "busy";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::unsupported: return "unsupported";
    case errc::no_device: return "no_device";
  }
  return "unknown";
}

error::error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}

void throw_error(errc code, const std::string& message) { throw error(code, message); }

}  // namespace gpm
