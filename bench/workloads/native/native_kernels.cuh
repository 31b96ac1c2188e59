// Device-side pieces the native-persistence kernels share. Every kernel keeps its working copy
// in GPU memory (the mirror: reads never cross PCIe, as the GPM paper advises in §4.3) and, in the
// modes whose kernels write the pool, also stores each result into the pool; gpm persists there
// too. Which of these a kernel does is a template parameter, chosen once per launch from the sink.
#pragma once

#include <cstdint>
#include <type_traits>

#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "native_store.hpp"

namespace gpmbench::native {

// An output array: its GPU-memory mirror and its place in the pool.
template <class T>
struct out_array {
  T* mirror;
  T* pool;
};

// Stores `v` as element `i` of `a`: always in the mirror; in the pool when the kernel writes it.
template <bool kToPool, class T>
__device__ inline void put(const out_array<T>& a, std::uint64_t i, T v) {
  a.mirror[i] = v;
  if constexpr (kToPool) a.pool[i] = v;
}

// Calls f(to_pool, persist) with std::bool_constant arguments matching the sink, so that a host
// function launches the kernel instantiation the mode needs.
template <class F>
void with_kernel_variant(const sink& s, F&& f) {
  if (s.kernel_persists()) {
    f(std::true_type{}, std::true_type{});
  } else if (s.kernel_writes_pool()) {
    f(std::true_type{}, std::false_type{});
  } else {
    f(std::false_type{}, std::false_type{});
  }
}

// The device counter that publish_when_grid_done needs, zero before the first launch.
class grid_counter {
 public:
  grid_counter() : count_(1) { count_.fill_bytes(0); }
  unsigned* get() const { return count_.data(); }

 private:
  gpm::device_buffer<unsigned> count_;
};

}  // namespace gpmbench::native
