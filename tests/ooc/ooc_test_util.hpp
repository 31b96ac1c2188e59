// Helpers shared by the gpm::ooc tests: files with known contents, small-cache options that force
// heavy eviction on the host emulator, and kernels that drive array<T>'s element and line access
// from many warps and report each access's status.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gpm/ooc/mapping.cuh>
#include <gpm/platform/kernel.cuh>

#include <gpm/platform/error.hpp>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace gpm::test::ooc {

using gpm::ooc::access;
using gpm::ooc::mode;
using gpm::ooc::status;

// The tests' line size: the smallest a GPU takes (64 KiB), and small lines on the host emulator
// (4 KiB), so that files of many lines stay small there. Sizes in the tests are in lines.
inline std::uint64_t line_size() {
  static const std::uint64_t bytes = gpm::query_device().emulated ? 4096 : 65536;
  return bytes;
}
inline std::uint64_t lines(std::uint64_t n) { return n * line_size(); }

// Caches far smaller than the files the tests map, so lines are evicted all the time.
inline gpm::ooc::mapping_options tiny(mode m, std::uint64_t gpu_lines = 8,
                                      std::uint64_t host_lines = 6) {
  gpm::ooc::mapping_options o;
  o.mode = m;
  o.line_bytes = line_size();
  o.gpu_cache_bytes = lines(gpu_lines);
  o.host_cache_bytes = lines(host_lines);
  return o;
}

inline void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// `n` bytes of a reproducible pattern.
inline std::vector<unsigned char> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<unsigned char> v(n);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  return v;
}

// The bytes of a mapping of `size` bytes at `offset` striped line by line over `files` (one
// file: a plain range), and the inverse: `data` written into the files.
inline std::vector<unsigned char> gather(const std::vector<std::vector<unsigned char>>& files,
                                         std::uint64_t offset, std::uint64_t size) {
  std::vector<unsigned char> data(size);
  for (std::uint64_t at = 0; at < size; at += line_size()) {
    const std::uint64_t l = at / line_size();
    const auto& file = files[l % files.size()];
    const std::uint64_t from = offset + l / files.size() * line_size();
    std::memcpy(data.data() + at, file.data() + from, std::min(line_size(), size - at));
  }
  return data;
}
inline void scatter(std::vector<std::vector<unsigned char>>& files, std::uint64_t offset,
                    const std::vector<unsigned char>& data) {
  for (std::uint64_t at = 0; at < data.size(); at += line_size()) {
    const std::uint64_t l = at / line_size();
    auto& file = files[l % files.size()];
    const std::uint64_t to = offset + l / files.size() * line_size();
    std::memcpy(file.data() + to, data.data() + at, std::min(line_size(), data.size() - at));
  }
}

// The elements of type T that `bytes` hold.
template <class T>
std::vector<T> as(const std::vector<unsigned char>& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// Test files: on the disk (the snapshot directory) or in tmpfs (the PM directory).
struct files {
  gpm::test::scratch_dirs dirs{"ooc"};
  std::string disk(const std::string& name) const { return dirs.snapshot_dir() + "/" + name; }
  std::string tmpfs(const std::string& name) const { return dirs.pm_dir() + "/" + name; }
  // A file of `bytes` pattern bytes on the disk.
  std::string make(const std::string& name, std::size_t bytes, std::uint64_t seed) const {
    const std::string path = disk(name);
    write_file(path, pattern(bytes, seed));
    return path;
  }
};

// Lowers the process's file size limit (writes past it fail with EFBIG, as on a full disk) and
// restores it.
class file_size_limit {
 public:
  explicit file_size_limit(std::uint64_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);  // else the write kills the process
    rlimit r = old_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~file_size_limit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = nullptr;
};

using gpm::test::expect_error;

// ---- kernels ------------------------------------------------------------------------------

template <class T>
__global__ void load_kernel(gpm::ooc::array<T> a, const std::uint64_t* idx, std::uint64_t n, T* out,
                            status* st) {
  for (std::uint64_t k : gpm::grid_stride(n)) st[k] = a.get(idx[k], out[k]);
}

template <class T>
__global__ void store_kernel(gpm::ooc::array<T> a, const std::uint64_t* idx, std::uint64_t n,
                             const T* values, status* st) {
  for (std::uint64_t k : gpm::grid_stride(n)) st[k] = a.set(idx[k], values[k]);
}

// Copies the whole array to `out`, a line per tile of G threads.
template <unsigned G, class T>
__global__ void line_read_kernel(gpm::ooc::array<T> a, T* out, status* st) {
  const auto tile = gpm::make_tile<G>();
  const std::uint64_t lines = (a.size() + a.elements_per_line() - 1) / a.elements_per_line();
  for (std::uint64_t l : gpm::grid_stride<G>(lines)) {
    gpm::ooc::line<T> ln;
    const status s = a.acquire(tile, l * a.elements_per_line(), access::read, ln);
    if (tile.thread_rank() == 0) st[l] = s;
    if (s != status::ok) continue;
    for (std::uint32_t k = tile.thread_rank(); k < ln.count; k += tile.size()) {
      out[ln.first + k] = ln.data[k];
    }
    a.release(tile, ln);
  }
}

// Writes values[i] to every element, a whole line per tile of G threads (access::write), or with
// access::read_write adds values[i] to what is there.
template <unsigned G, class T>
__global__ void line_write_kernel(gpm::ooc::array<T> a, const T* values, access intent,
                                  status* st) {
  const auto tile = gpm::make_tile<G>();
  const std::uint64_t lines = (a.size() + a.elements_per_line() - 1) / a.elements_per_line();
  for (std::uint64_t l : gpm::grid_stride<G>(lines)) {
    gpm::ooc::line<T> ln;
    const status s = a.acquire(tile, l * a.elements_per_line(), intent, ln);
    if (tile.thread_rank() == 0) st[l] = s;
    if (s != status::ok) continue;
    for (std::uint32_t k = tile.thread_rank(); k < ln.count; k += tile.size()) {
      ln.data[k] = intent == access::write ? values[ln.first + k]
                                           : static_cast<T>(ln.data[k] + values[ln.first + k]);
    }
    a.release(tile, ln);
  }
}

// ---- drivers ------------------------------------------------------------------------------

inline constexpr unsigned kBlocks = 8;
inline constexpr unsigned kThreads = 128;

template <class T>
struct loaded {
  std::vector<T> values;
  std::vector<status> st;
};

template <class T>
loaded<T> load(const gpm::ooc::array<T>& a, const std::vector<std::uint64_t>& idx,
               unsigned blocks = kBlocks) {
  auto d_idx = gpm::test::to_device(idx);
  gpm::device_buffer<T> out(idx.size());
  out.fill_bytes(0);
  gpm::device_buffer<status> st(idx.size());
  gpm::launch(load_kernel<T>, blocks, kThreads, 0, nullptr, a, d_idx.data(),
              std::uint64_t{idx.size()}, out.data(), st.data());
  gpm::check_cuda(cudaDeviceSynchronize(), "load_kernel");
  return {gpm::test::to_host(out), gpm::test::to_host(st)};
}

template <class T>
std::vector<status> store(const gpm::ooc::array<T>& a, const std::vector<std::uint64_t>& idx,
                          const std::vector<T>& values) {
  auto d_idx = gpm::test::to_device(idx);
  auto d_val = gpm::test::to_device(values);
  gpm::device_buffer<status> st(idx.size());
  gpm::launch(store_kernel<T>, kBlocks, kThreads, 0, nullptr, a, d_idx.data(),
              std::uint64_t{idx.size()}, d_val.data(), st.data());
  gpm::check_cuda(cudaDeviceSynchronize(), "store_kernel");
  return gpm::test::to_host(st);
}

inline std::uint64_t line_count(std::uint64_t elements, std::uint32_t per_line) {
  return (elements + per_line - 1) / per_line;
}

template <unsigned G, class T>
loaded<T> read_lines(const gpm::ooc::array<T>& a) {
  gpm::device_buffer<T> out(a.size());
  out.fill_bytes(0);
  gpm::device_buffer<status> st(line_count(a.size(), a.elements_per_line()));
  gpm::launch(line_read_kernel<G, T>, kBlocks, kThreads, 0, nullptr, a, out.data(), st.data());
  gpm::check_cuda(cudaDeviceSynchronize(), "line_read_kernel");
  return {gpm::test::to_host(out), gpm::test::to_host(st)};
}

template <unsigned G, class T>
std::vector<status> write_lines(const gpm::ooc::array<T>& a, const std::vector<T>& values,
                                access intent) {
  auto d_val = gpm::test::to_device(values);
  gpm::device_buffer<status> st(line_count(a.size(), a.elements_per_line()));
  gpm::launch(line_write_kernel<G, T>, kBlocks, kThreads, 0, nullptr, a, d_val.data(), intent,
              st.data());
  gpm::check_cuda(cudaDeviceSynchronize(), "line_write_kernel");
  return gpm::test::to_host(st);
}

inline std::vector<std::uint64_t> iota(std::uint64_t n, std::uint64_t from = 0) {
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

inline void expect_all(const std::vector<status>& st, status want) {
  for (std::size_t i = 0; i < st.size(); ++i) {
    ASSERT_EQ(st[i], want) << "access " << i << ": " << gpm::ooc::to_string(st[i]);
  }
}

}  // namespace gpm::test::ooc
