// gpmbench's shared setup pieces (see resources.hpp).
#include "resources.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>

#include "timing.hpp"

namespace gpmbench {

void check_failed(const std::string& what) {
  throw std::runtime_error("verification failed: " + what);
}

geometry filling_geometry(const mode_context& ctx) {
  int dev = 0;
  gpm::check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  gpm::check_cuda(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  const unsigned threads = ctx.options.threads_per_block;
  const unsigned per_sm =
      ctx.options.blocks_per_sm != 0
          ? ctx.options.blocks_per_sm
          : std::max(1u, static_cast<unsigned>(p.maxThreadsPerMultiProcessor) / threads);
  return {static_cast<unsigned>(std::max(1, p.multiProcessorCount)) * per_sm, threads};
}

pinned_buffer::pinned_buffer(std::uint64_t bytes) : bytes_(bytes) {
  gpm::check_cuda(cudaMallocHost(&data_, bytes), "cudaMallocHost");
}

pinned_buffer::~pinned_buffer() { cudaFreeHost(data_); }

bench_pool::bench_pool(const mode_context& ctx, const std::string& name,
                       std::uint64_t pool_bytes, std::uint64_t object_bytes,
                       unsigned directory_capacity)
    : name_(name) {
  options_.pm_dir = ctx.pm_dir;
  options_.snapshot_dir = ctx.disk_dir + "/" + name;
  options_.gpu = gpm::gpu_mapping::required;
  options_.directory_capacity = directory_capacity;
  pool_.emplace(gpm::pool::create(name, pool_bytes, "gpmbench", options_));
  if (object_bytes == kNoObject) return;
  // One page less than is free leaves room for aligning the object to a page.
  if (object_bytes == 0) object_bytes = (pool_->info().free_bytes / kPageBytes - 1) * kPageBytes;
  offset_ = pool_->allocate("data", object_bytes, kPageBytes);
  object_bytes_ = object_bytes;
}

bench_pool::~bench_pool() {
  try {
    pool_->close();
    gpm::pool::remove(name_, options_, /*with_snapshot=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpmbench: cannot remove pool %s: %s\n", name_.c_str(), e.what());
  }
}

void bench_pool::forget_snapshots() const { std::filesystem::remove_all(options_.snapshot_dir); }

void note_if_in_memory(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return;
  const auto type = static_cast<unsigned long>(fs.f_type);
  if (type == TMPFS_MAGIC || type == RAMFS_MAGIC) {
    std::fprintf(stderr,
                 "gpmbench: note: %s is in memory (tmpfs), so the modes that write to disk "
                 "measure memory, not a disk; choose another --disk-dir\n",
                 dir.c_str());
  }
}

void write_file_synced(const std::string& path, const std::vector<unsigned char>& chunk,
                       std::uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  std::uint64_t done = 0;
  while (done < bytes) {
    const std::uint64_t off = done % chunk.size();
    const ssize_t n = ::write(fd, chunk.data() + off, std::min(chunk.size() - off, bytes - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
    }
    done += static_cast<std::uint64_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(err));
  }
  ::close(fd);
}

void fill_incompressible(unsigned char* p, std::uint64_t bytes) {
  for (std::uint64_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) {
    const std::uint64_t v = gpm::mix64(i);
    std::memcpy(p + i * sizeof v, &v, sizeof v);
  }
}

measurement measure_d2h_memcpy(const mode_context& ctx, std::uint64_t bytes) {
  constexpr unsigned char kFill = 0xa5;
  gpm::device_buffer<unsigned char> src(bytes);
  src.fill_bytes(kFill);
  const pinned_buffer dst(bytes);
  std::memset(dst.data(), 0, bytes);
  const gpm::stream s;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    return seconds_on_stream(s, [&] {
      gpm::check_cuda(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToHost, s),
                      "cudaMemcpyAsync");
    });
  });
  if (!std::all_of(dst.data(), dst.data() + bytes, [](unsigned char c) { return c == kFill; })) {
    check_failed("d2h_memcpy: the pinned buffer does not hold the device's bytes");
  }
  m.sizes = {{"bytes", bytes}};
  m.throughput = gigabytes(bytes);
  return m;
}

mode d2h_ceiling_mode(std::function<std::uint64_t(const mode_context&)> bytes) {
  return {"d2h_memcpy", "cudaMemcpy device -> pinned host: the ceiling for moving GPU results",
          "", [bytes](const mode_context& ctx) { return measure_d2h_memcpy(ctx, bytes(ctx)); }};
}

mode persist_stream_ceiling_mode(std::function<std::uint64_t(const mode_context&)> bytes) {
  return {"persist_stream",
          "coalesced 16-byte stores into a pool, one persist per thread: the ceiling for "
          "persisting from GPU code",
          "", [bytes](const mode_context& ctx) { return measure_persist_stream(ctx, bytes(ctx)); }};
}

}  // namespace gpmbench
