// What a path's file type is, in words, for the errors that refuse special files where gpmkit
// needs a regular file (a pool, a mapped range, an epoch log): "/x is a FIFO (named pipe): ...".
// One list, so that every module names a special file the same way. Host only.
#pragma once

#include <sys/stat.h>

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

}  // namespace gpm::detail
