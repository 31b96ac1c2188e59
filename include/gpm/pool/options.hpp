// How a program opens a pool (pool_options, gpu_mapping) and what a snapshot did
// (snapshot_result): the plain values gpm::pool (pool.hpp) shares with the pool layer's private
// parts in src/pool (backing and mapping, snapshots), which include this header and never pool.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gpm {

// Whether the pool is mapped into the GPU.
enum class gpu_mapping {
  automatic,  // register with CUDA when a device is present; otherwise host-only, with a notice
  required,   // fail if the pool cannot be mapped into a GPU
  none,       // host access only (tools that inspect pools)
};

struct pool_options {
  // Directory of pool files named without a '/'. Empty: $GPMKIT_PM_DIR, else /dev/shm/gpmkit.
  std::string pm_dir;
  // Directory of snapshots. Empty: $GPMKIT_SNAPSHOT_DIR, else /var/tmp/gpmkit.
  std::string snapshot_dir;
  gpu_mapping gpu = gpu_mapping::automatic;
  bool read_only = false;
  // On open: restore from the newest valid snapshot when the pool file is missing or corrupt.
  bool restore_from_snapshot = true;
  // Named objects the pool can hold (create only).
  std::uint32_t directory_capacity = 1024;
  // Where notices go (a restore, a fallback to the older root record, no GPU). Default: stderr.
  std::function<void(const std::string&)> notice;
};

struct snapshot_result {
  std::uint64_t seq = 0;            // snapshot number (1 for the first)
  std::uint64_t pages_total = 0;    // pages in the pool
  std::uint64_t pages_changed = 0;  // pages that differed from the previous snapshot
  std::uint64_t bytes_written = 0;  // bytes written to disk, journal and image together
  double seconds = 0;
};

}  // namespace gpm
