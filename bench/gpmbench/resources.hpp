// What gpmbench workloads share to set up a measurement: pinned host buffers, pools made for one
// mode, files on disk, the GPU-filling launch geometry, and the failure a mode raises when its
// data is wrong. Nothing here measures anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gpm/pool/pool.hpp>

#include "workload.hpp"

namespace gpmbench {

inline constexpr std::uint64_t kMiB = 1ull << 20;

// Called when a mode's data is not what it computed: the run fails rather than report a number.
[[noreturn]] void check_failed(const std::string& what);

// The geometry of kernels that fill the GPU: by default enough blocks to give every
// multiprocessor its maximum resident threads; --threads-per-block and --blocks-per-sm change it.
struct geometry {
  unsigned blocks;
  unsigned threads;
};
geometry filling_geometry(const mode_context& ctx);

// Pinned host memory: what lets cudaMemcpy run at the link's speed.
class pinned_buffer {
 public:
  explicit pinned_buffer(std::uint64_t bytes);
  ~pinned_buffer();
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// A pool in the run's PM directory, mapped into the GPU, with its snapshots in
// <run disk dir>/<name>. By default it holds one zero-filled object named "data"; pass
// object_bytes = kNoObject to allocate the objects yourself. Destroying it deletes the pool and
// its snapshots, so that one mode's pools do not hold memory while the next mode runs.
class bench_pool {
 public:
  static constexpr std::uint64_t kPageBytes = 4096;  // pools are made of 4 KiB pages
  static constexpr std::uint64_t kNoObject = ~0ull;

  // object_bytes 0: the largest page-aligned object the pool can hold.
  bench_pool(const mode_context& ctx, const std::string& name, std::uint64_t pool_bytes,
             std::uint64_t object_bytes = 0, unsigned directory_capacity = 4);
  ~bench_pool();
  bench_pool(const bench_pool&) = delete;
  bench_pool& operator=(const bench_pool&) = delete;

  gpm::pool& pool() { return *pool_; }
  const gpm::pool& pool() const { return *pool_; }
  std::uint64_t object_bytes() const { return object_bytes_; }
  template <class T>
  T* device() const {
    return pool_->ref().ptr<T>(offset_);
  }
  template <class T>
  T* host() const {
    return pool_->host_ptr<T>(offset_);
  }
  // Deletes the snapshots taken so far, so that the next snapshot writes the whole pool.
  void forget_snapshots() const;

 private:
  std::string name_;
  gpm::pool_options options_;
  std::optional<gpm::pool> pool_;
  std::uint64_t offset_ = 0;
  std::uint64_t object_bytes_ = 0;
};

// A pool just big enough for objects of `object_bytes` in all: the header, root records and a
// small directory take a few pages, well under the 1 MiB added.
inline std::uint64_t pool_bytes_for(std::uint64_t object_bytes) { return object_bytes + kMiB; }

// Says so on stderr when a directory meant to be on disk is in memory (tmpfs).
void note_if_in_memory(const std::string& dir);

// write() `bytes` bytes to a new file at `path`, repeating `chunk`, then fsync() and close().
void write_file_synced(const std::string& path, const std::vector<unsigned char>& chunk,
                       std::uint64_t bytes);

// Bytes that no file system can compress away.
void fill_incompressible(unsigned char* p, std::uint64_t bytes);

// cudaMemcpy of `bytes` from GPU memory to pinned host memory, `ctx.repeat`ed: the ceiling that
// every way of moving GPU results to the host is compared against. Checks the copied bytes.
measurement measure_d2h_memcpy(const mode_context& ctx, std::uint64_t bytes);

// A mode named "d2h_memcpy" that measures the ceiling above for `bytes(ctx)` bytes, for
// workloads whose GB/s figures are compared against it in the same run.
mode d2h_ceiling_mode(std::function<std::uint64_t(const mode_context&)> bytes);

// The `platform` workload's persist_stream (workloads/platform): a kernel storing `bytes` into a
// pool object with coalesced 16-byte stores, one persist per thread, `ctx.repeat`ed, checked.
// The bandwidth GPU code can persist at: the ceiling of modes that persist records or logs.
measurement measure_persist_stream(const mode_context& ctx, std::uint64_t bytes);

// A mode named "persist_stream" that measures the ceiling above for `bytes(ctx)` bytes.
mode persist_stream_ceiling_mode(std::function<std::uint64_t(const mode_context&)> bytes);

}  // namespace gpmbench
