// gpm::launch: the one way gpmkit code starts a kernel, on both backends. It checks the launch
// (throwing gpm::error with the kernel's call site on a bad configuration) so no launch goes
// unchecked; faults inside the kernel surface at the next synchronisation, as in CUDA.
// Include through <gpm/platform/kernel.cuh>.
#pragma once

#include <cstddef>
#include <memory>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

#include <gpm/platform/runtime.hpp>

namespace gpm {

// Grid dimensions that remember where the launch was written, for error messages.
struct grid_dims {
  dim3 dims;
  std::source_location site;
  grid_dims(dim3 d, std::source_location s = std::source_location::current()) : dims(d), site(s) {}
  grid_dims(unsigned int x, std::source_location s = std::source_location::current())
      : dims(x), site(s) {}
};

#if GPM_BACKEND_HOST
namespace emu::detail {
struct kernel_launch {
  const void* kernel;
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes;
  cudaStream_t stream;
  std::source_location site;
  std::shared_ptr<const void> bound_args;  // kernel pointer plus a copy of every argument
  void (*invoke)(const void* bound_args);  // calls the kernel with its own copy of the args
};
cudaError_t submit_launch(kernel_launch&& launch);
}  // namespace emu::detail
#endif

namespace detail {
unsigned resident_blocks(const void* kernel, unsigned threads, std::size_t shared_bytes);
// Blocks of that shape of `kernel` one multiprocessor runs at once (0: none fits); throws
// errc::cuda if the runtime cannot say. The kernel's MaxDynamicSharedMemorySize attribute must
// allow `shared_bytes`, or the answer is 0.
unsigned blocks_per_multiprocessor(const void* kernel, unsigned threads, std::size_t shared_bytes);
}

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), grid_dims grid, dim3 block, std::size_t shared_bytes,
            cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
#if GPM_BACKEND_CUDA
  kernel<<<grid.dims, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  const cudaError_t status = cudaGetLastError();
#else
  struct bound {
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> args;
  };
  auto b = std::make_shared<const bound>(
      bound{kernel, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)});
  const cudaError_t status = emu::detail::submit_launch(
      emu::detail::kernel_launch{reinterpret_cast<const void*>(kernel), grid.dims, block,
                                 shared_bytes, stream, grid.site, std::move(b), [](const void* p) {
                                   const bound& bb = *static_cast<const bound*>(p);
                                   std::apply(bb.kernel, bb.args);
                                 }});
#endif
  if (status != cudaSuccess)
    detail::throw_launch_error(status, reinterpret_cast<const void*>(kernel), grid.dims, block,
                               shared_bytes, grid.site);
}

// How many blocks of `threads` threads (and `shared_bytes` of dynamic shared memory) of `kernel`
// the device runs at the same time. A grid-stride loop over data that streams through a cache
// (gpm::ooc arrays) should launch no more: a larger grid runs in waves, and each later wave walks
// the data again after the earlier ones have moved the cache past it. Throws
// errc::invalid_argument when no block of that shape can run.
template <class... Params>
unsigned resident_blocks(void (*kernel)(Params...), unsigned threads,
                         std::size_t shared_bytes = 0) {
  return detail::resident_blocks(reinterpret_cast<const void*>(kernel), threads, shared_bytes);
}

}  // namespace gpm
