// The GPM paper's logging C API (ASPLOS'22, Table 2, "Logging" rows) on top of gpm::hcl_log and
// gpm::conv_log, for porting code written against libGPM. New code should use the C++ classes.
// Each log is a pool file of its own (layout "gpmlog") holding one log object.
//
//   host:   gpmlog* log = gpmlog_create_hcl("kvs.log", 64 << 20, blocks, threads);
//           gpmlog* meta = gpmlog_create_conv("meta.log", 1 << 20, 16);
//           gpmlog* again = gpmlog_open("kvs.log");   gpmlog_close(log);
//   device: gpmlog_insert(log, &entry, sizeof entry);          // hcl: the calling thread's log
//           gpmlog_insert(meta, &size, sizeof size, 3);        // conv: partition 3
//           gpmlog_read / gpmlog_remove / gpmlog_clear / gpmlog_is_empty / gpmlog_size
//
// Device functions return 0 on success, else the gpm::log_status value (gpm::log_status::empty
// when there is nothing to read). For a conv log, partition -1 means the calling block's
// partition (linear block index modulo the partition count); hcl logs ignore the partition.
// Host functions return nullptr on failure, with the reason on stderr. The handle is a device
// pointer: pass it to kernels as is. Durability: that of the pool (docs/logging.md).
#pragma once

#include <cstddef>

#include <gpm/config.hpp>

struct gpmlog;

// Creates a log file `path` holding an HCL log of `size` bytes for kernels of `blocks` blocks of
// `threads` threads (each thread gets size / (blocks * threads) bytes, rounded down to 4).
gpmlog* gpmlog_create_hcl(const char* path, std::size_t size, int blocks, int threads);
// Creates a log file `path` holding a conventional log of `size` bytes in `n_partitions` parts.
gpmlog* gpmlog_create_conv(const char* path, std::size_t size, int n_partitions);
// Opens a log file made by either create function (after a restart or crash).
gpmlog* gpmlog_open(const char* path);
// Closes the log and its pool file cleanly; the handle is invalid afterwards.
void gpmlog_close(gpmlog* log);
// Host, between kernels: truncates the whole log (all threads or partitions) in O(1).
int gpmlog_clear_all(gpmlog* log);

// Device API: needs a compiler that understands kernels (nvcc, or the host backend).
#if defined(__CUDACC__) || GPM_BACKEND_HOST
#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>

struct gpmlog {
  bool is_hcl;
  gpm::hcl_log_ref hcl;
  gpm::conv_log_ref conv;
};

namespace gpm::detail::log {
__device__ inline std::uint32_t partition_of(const gpmlog* log, int partition) {
  if (partition >= 0) return static_cast<std::uint32_t>(partition);
  const std::uint64_t block =
      blockIdx.x + std::uint64_t{gridDim.x} * (blockIdx.y + std::uint64_t{gridDim.y} * blockIdx.z);
  return static_cast<std::uint32_t>(block % log->conv.partitions());
}
__device__ inline int status_code(gpm::log_status s) { return static_cast<int>(s); }
__device__ inline std::uint32_t entry_size(std::size_t size) {
  return size > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(size);
}
}  // namespace gpm::detail::log

__device__ inline int gpmlog_insert(gpmlog* log, const void* addr, std::size_t size,
                                    int partition = -1) {
  namespace L = gpm::detail::log;
  if (size > 0xffffffffu) return L::status_code(gpm::log_status::full);
  return L::status_code(
      log->is_hcl ? log->hcl.insert(addr, L::entry_size(size))
                  : log->conv.insert(L::partition_of(log, partition), addr, L::entry_size(size)));
}
__device__ inline int gpmlog_read(gpmlog* log, void* addr, std::size_t size, int partition = -1) {
  namespace L = gpm::detail::log;
  return L::status_code(
      log->is_hcl ? log->hcl.read(addr, L::entry_size(size))
                  : log->conv.read(L::partition_of(log, partition), addr, L::entry_size(size)));
}
__device__ inline int gpmlog_remove(gpmlog* log, std::size_t size, int partition = -1) {
  namespace L = gpm::detail::log;
  return L::status_code(
      log->is_hcl ? log->hcl.remove(L::entry_size(size))
                  : log->conv.remove(L::partition_of(log, partition), L::entry_size(size)));
}
__device__ inline int gpmlog_clear(gpmlog* log, int partition = -1) {
  namespace L = gpm::detail::log;
  return L::status_code(log->is_hcl ? log->hcl.clear()
                                    : log->conv.clear(L::partition_of(log, partition)));
}
__device__ inline bool gpmlog_is_empty(gpmlog* log, int partition = -1) {
  return log->is_hcl ? log->hcl.is_empty()
                     : log->conv.is_empty(gpm::detail::log::partition_of(log, partition));
}
// Bytes in use in the caller's log or the partition (entries and their 12-byte trailers).
__device__ inline std::size_t gpmlog_size(gpmlog* log, int partition = -1) {
  return log->is_hcl ? log->hcl.size()
                     : log->conv.size(gpm::detail::log::partition_of(log, partition));
}
#endif
