// The user-level API of DRAGON (SC'18, Listing 1) on top of gpmkit, for porting code written
// against it. New code should use gpm::ooc::mapping and gpm::ooc::array<T> (docs/out-of-core.md).
//
//   dragon_map(path, size, offset, flags, &addr)  maps bytes [offset, offset + size) of the file
//       and returns their GPU address in *addr: a plain device pointer, filled from the file
//   dragon_sync(addr, size)  writes [addr, addr + size) of a mapping back and fdatasyncs the file
//   dragon_unmap(addr)       writes the mapping back (as dragon_sync) and frees it
//
// flags: D_READ (read-only: never written back), D_WRITE (write-only: not read, starts zeroed, the
// whole range is written back: plain stores are not tracked, so bytes the kernels did not store
// are written as zeros; the file is created if missing), both or 0 (read and write), D_VOLATILE
// (intermediate data: filled from the file, or zeroed if there is none, never written back; sync
// does nothing).
//
// DRAGON pages mappings larger than GPU memory through the GPU with a driver fault path. gpmkit
// has none (it patches no driver, and managed memory must not be oversubscribed on these
// machines): a mapping that does not fit in free GPU memory fails with D_ERR_TOO_LARGE, and
// dragon_error_message() says to use gpm::ooc::array, which pages through a software cache.
// No exception leaves these functions; each failure returns a code, and the calling thread's
// dragon_error_message() says what went wrong and what to do.
#pragma once

#include <sys/types.h>

#include <cstddef>

#define D_READ 0x01
#define D_WRITE 0x02
#define D_VOLATILE 0x04

typedef enum dError {
  D_OK = 0,
  D_ERR_ARG = 1,        // a bad argument: flags, a null or unknown address, a range the file
                        // does not hold, a special file
  D_ERR_FILE = 2,       // the file does not exist
  D_ERR_BUSY = 3,       // the range overlaps one mapped for writing
  D_ERR_IO = 4,         // a read, write or fdatasync failed (the mapping is kept)
  D_ERR_NOMEM = 5,      // host or GPU memory could not be allocated
  D_ERR_TOO_LARGE = 6,  // the mapping does not fit in free GPU memory: use gpm::ooc::array
  D_ERR_DEVICE = 7,     // no GPU, or the CUDA runtime failed
} dError_t;

extern "C" {
dError_t dragon_map(const char* filename, size_t size, off_t offset, unsigned short flags,
                    void** addr);
dError_t dragon_sync(void* addr, size_t size);
dError_t dragon_unmap(void* addr);
// What the calling thread's last failed call went wrong on, and what to do ("" after success).
const char* dragon_error_message(void);
}
