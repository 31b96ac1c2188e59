// Helpers shared by gpmkit tests on both backends.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gpm/platform/error.hpp>
#include <gpm/platform/runtime.hpp>

namespace gpm::test {

// Copies a device buffer back into a vector.
template <class T>
std::vector<T> to_host(const device_buffer<T>& d) {
  std::vector<T> h(d.size());
  d.copy_to_host(h.data(), h.size());
  return h;
}

// A device buffer holding a copy of `h`.
template <class T>
device_buffer<T> to_device(const std::vector<T>& h) {
  device_buffer<T> d(h.size());
  d.copy_from_host(h.data(), h.size());
  return d;
}

// Random values from a fixed seed (tests must be reproducible), never all zero.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, T lo, T hi) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<T> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  }
  return v;
}

// Waits for the device and fails the test on any error, naming it.
inline void sync_ok() {
  const cudaError_t e = cudaDeviceSynchronize();
  ASSERT_EQ(e, cudaSuccess) << cudaGetErrorName(e) << ": " << cudaGetErrorString(e);
}

// Expects f() to throw a gpm::error with `code` whose message contains `words`.
template <class F>
void expect_error(gpm::errc code, const std::string& words, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no gpm::error was thrown; expected " << gpm::to_string(code);
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << "'" << e.what() << "' does not say '" << words << "'";
  }
}

// Per-thread statuses written by kernels (as integers), read back on the host.
inline std::vector<std::uint32_t> statuses(const device_buffer<std::uint32_t>& d) {
  sync_ok();
  return to_host(d);
}

}  // namespace gpm::test
