// Checks of the paths of users' files (pools, mapped ranges, epoch logs, their directories), for
// every module that opens one: a path that no file can have, and a file type gpmkit cannot use,
// are errors that say so ("/x is a FIFO (named pipe): ..."), never a truncated path or a wait on
// a FIFO. One list of file-type names, so that every module names a special file the same way.
// Host only.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <gpm/platform/error.hpp>

namespace gpm::detail {

// "a directory", "a FIFO (named pipe)", ... for st_mode `m`; "a regular file" for one.
inline const char* file_type_name(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// Throws errc::invalid_argument if `path` (`what`: "pool path", "spill_dir", ...) holds a NUL
// byte: the system would see only the part before it, another file than the one named (a C++
// string or a Python str can hold one; a command line cannot).
inline void require_no_nul(const std::string& path, const char* what) {
  const std::size_t at = path.find('\0');
  if (at == std::string::npos) return;
  throw_error(errc::invalid_argument, std::string(what) + " \"" + path.substr(0, at) +
                                          "\\0...\" holds a NUL byte at " + std::to_string(at) +
                                          ": no file has such a name");
}

// std::filesystem's throwing calls would let a std::filesystem::filesystem_error out of gpmkit's
// host APIs, which report every failure as a gpm::error. These say what the path is and why:

// Whether `path` names something (following links: a dangling link does not). Throws errc::io
// when the system cannot tell: a name too long, a directory on the way that may not be searched.
inline bool path_exists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  throw_error(errc::io, "cannot examine " + path + ": " + std::strerror(errno));
}

// Renames `from` to `to`; throws errc::io naming both.
inline void rename_path(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw_error(errc::io, "cannot rename " + from + " to " + to + ": " + std::strerror(errno));
  }
}

// `path` made absolute against the working directory and normalized; throws errc::io if the
// working directory cannot be read.
inline std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) throw_error(errc::io, "cannot make " + path + " an absolute path: " + ec.message());
  return p.lexically_normal().string();
}

}  // namespace gpm::detail
