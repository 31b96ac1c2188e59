// gpm::ooc: out-of-core GPU computing on files larger than GPU and host memory (DRAGON, SC'18,
// in user space). This header: the modes a file range is mapped with and the per-access status
// that device operations return (WarpCore-style: a device access never traps and never reads
// outside the mapping; it says what went wrong). Host and device code; no CUDA headers.
#pragma once

#include <cstdint>

namespace gpm::ooc {

// How a mapping's data moves (DRAGON §III-C, III-D; docs/out-of-core.md).
enum class mode : std::uint8_t {
  read_write,     // fetched on first touch, written back when evicted dirty and at sync/unmap
  read,           // fetched on first touch; never written: evicted lines are dropped
  write,          // never fetched (lines start zeroed); only the bytes written go back
  volatile_data,  // intermediate data: starts as the file's bytes (or zeros), spills to host
                  // memory and a private temporary file, never reaches the mapped file
};
const char* to_string(mode m) noexcept;

// What one device access did.
enum class status : std::uint8_t {
  ok = 0,
  out_of_range = 1,  // the index lies past the end of the array: nothing was read or written
  read_only = 2,     // a store to a mode::read mapping
  write_only = 3,    // a load from a mode::write mapping (its lines hold only what was written)
  io_error = 4,      // the host could not read the line or make room for it (disk full, I/O
                     // error); the mapping's stats() and sync() name the cause
};
const char* to_string(status s) noexcept;

// What a tile means to do with a line it acquires (array<T>::acquire).
enum class access : std::uint8_t {
  read,        // loads only
  read_write,  // loads and any stores (mode::read_write and mode::volatile_data)
  write,       // the tile stores every element of the line's span before releasing it
};

}  // namespace gpm::ooc
