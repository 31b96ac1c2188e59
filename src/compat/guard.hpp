// What every function of the papers' C APIs (libgpm.cpp, gpmlog.cu, gpmcp.cpp) does at its
// boundary: no C++ exception crosses it (each becomes the function's failure value and one line on
// stderr naming the function), and a call that creates a pool file and then fails removes that
// file again, so a failed create leaves nothing and a retry does not find "already exists".
// DRAGON's functions (dragon.cpp) report through error codes and a message of their own instead.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include <gpm/platform/checked_math.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm::detail::compat {

// Runs `body`; on any exception prints "<function>: <what>" and returns `failure`.
template <class R, class F>
R guarded(const char* function, R failure, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", function, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: an unknown failure\n", function);
  }
  return failure;
}

// A C string argument that names a file: refused when null or empty.
inline std::string path_argument(const char* path) {
  require(path != nullptr && *path != '\0', "the path is null or empty");
  return path;
}

// Bytes of a pool holding one object of `payload` bytes: the payload rounded to pages, plus the
// pool's header, root records and a one-page directory. Too large a payload is invalid_argument.
inline std::uint64_t one_object_pool_bytes(std::uint64_t payload) {
  const auto pages = checked_round_up(payload, 4096);
  const auto total = pages ? checked_add(*pages, 4 * 4096) : std::nullopt;
  if (!total) {
    throw_error(errc::invalid_argument,
                "a region of " + std::to_string(payload) + " bytes is too large for a pool");
  }
  return *total;
}

// Runs `init` on `p`, a pool this call has just created; if `init` throws, closes the pool and
// removes its file before the exception goes on.
template <class F>
decltype(auto) initialize_or_remove(pool& p, F&& init) {
  try {
    return std::forward<F>(init)();
  } catch (...) {
    const std::string file = p.path();
    p.close();
    ::unlink(file.c_str());
    throw;
  }
}

}  // namespace gpm::detail::compat
