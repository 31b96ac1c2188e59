// What every gpmkit kernel source (.cu) includes first: the CUDA device language on either
// backend (nvcc and the real CUDA headers, or g++ and the host SIMT emulator), cooperative
// groups as `cg`, scoped atomics, grid-stride ranges and tiles (grid.cuh), gpm::launch, and the
// runtime surface. Code written against this header compiles and behaves the same on both
// backends.
#pragma once

#include <cstdint>

#include <gpm/config.hpp>
#if GPM_BACKEND_CUDA
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#else
#include <gpm/platform/detail/emu/cooperative_groups.hpp>
#endif

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/launch.cuh>
#include <gpm/platform/runtime.hpp>

namespace cg = cooperative_groups;

#include <gpm/platform/grid.cuh>

namespace gpm {

// The dynamic shared memory of the calling block (the `shared_bytes` given to gpm::launch),
// aligned to 16 bytes. Use this instead of `extern __shared__` arrays, which the host backend
// cannot express.
template <class T>
__device__ inline T* dynamic_shared_memory() {
#if GPM_BACKEND_CUDA
  extern __shared__ __align__(16) unsigned char gpm_dynamic_shared_memory[];
  return reinterpret_cast<T*>(gpm_dynamic_shared_memory);
#else
  return reinterpret_cast<T*>(emu::detail::this_thread().block->dynamic_shared);
#endif
}

// The lane of the calling thread in its warp (0..31).
__device__ inline unsigned int lane_id() {
#if GPM_BACKEND_CUDA
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
#else
  return emu::detail::this_thread().lane;
#endif
}

// Nanoseconds of a clock that all blocks of the device share (the GPU's global timer; on the
// emulator the host's steady clock), for measurements that span blocks, such as rates per time
// slice. Its resolution may be as coarse as a microsecond.
__device__ inline std::uint64_t global_time_ns() {
#if GPM_BACKEND_CUDA
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<std::uint64_t>(clock64());
#endif
}

}  // namespace gpm
