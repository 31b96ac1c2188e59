// Checks of the paths of users' files (pools, mapped ranges, epoch logs, their directories), for
// every module that opens one: a path that no file can have, and a file type gpmkit cannot use,
// are errors that say so ("/x is a FIFO (named pipe): ..."), never a truncated path or a wait on
// a FIFO. One list of file-type names, so that every module names a special file the same way.
// Host only.
#pragma once

#include <sys/stat.h>

#include <string>

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

}  // namespace gpm::detail
