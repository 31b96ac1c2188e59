// Host SIMT emulator: the narrow interface between kernel code (built-ins, intrinsics, atomics,
// cooperative groups) and the emulator's scheduler. Kernel code sees the current GPU thread
// through `current_thread` and calls the out-of-line entry points below at every point where a
// real GPU thread could wait or be overtaken. Nothing here is for users to call directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>

#include <gpm/platform/detail/emu/vector_types.hpp>

namespace gpm::emu::detail {

// What a kernel can ask about the block it runs in; one per running block.
struct block_context {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  unsigned char* dynamic_shared;
  std::size_t dynamic_shared_bytes;
};

// What a kernel can ask about the GPU thread it is; one per fiber.
struct thread_context {
  uint3 thread_idx;
  unsigned int linear;  // linear thread rank in the block (x fastest), as CUDA forms warps
  unsigned int lane;
  unsigned int warp;
  const block_context* block;
  // Atomics and fences count this down and offer to yield at zero, so spin loops made of
  // atomics let the other threads of their block run (CUDA's forward-progress guarantee).
  std::uint32_t yield_countdown;
};

// The GPU thread running on this OS thread, or nullptr outside kernels.
extern thread_local thread_context* current_thread;

inline thread_context& this_thread() { return *current_thread; }

enum class warp_op : std::uint8_t {
  sync,
  ballot,
  any,
  all,
  shfl_idx,
  shfl_up,
  shfl_down,
  shfl_xor,
  match_any,
  match_all,
  reduce_add,
  reduce_min_unsigned,
  reduce_max_unsigned,
  reduce_min_signed,
  reduce_max_signed,
  reduce_and,
  reduce_or,
  reduce_xor,
};

struct warp_result {
  std::uint64_t value;
  bool predicate;
};

enum class barrier_op : std::uint8_t { sync, count, all, any };

// A warp collective: waits until every live lane named in `mask` has arrived at a collective
// of the same kind and mask, then returns this lane's result. Faults the kernel on a mask or
// kind disagreement. `arg` is the per-lane shuffle argument, `width` the shuffle width.
warp_result warp_collective(warp_op op, unsigned mask, std::uint64_t value, int arg, int width,
                            const std::source_location& where);

// __activemask(): the lanes of this warp that reach the same call site while the others are
// waiting elsewhere or have exited.
unsigned active_mask(const std::source_location& where);

// __syncthreads() and its _count/_and/_or forms; returns the reduced predicate.
int block_barrier(barrier_op op, int predicate, const std::source_location& where);

// Offer the scheduler a chance to run another GPU thread (atomics, fences, failed CAS).
void yield_now();

// Ends the kernel with a fault that is reported like a GPU fault (sticky error).
[[noreturn]] void fault(const char* what, const std::source_location& where);

// Called by atomics and fences: cheap unless the countdown expires or the caller knows it is
// spinning (a failed compare-and-swap).
inline void atomic_point(bool spinning = false) {
  thread_context* t = current_thread;
  if (t != nullptr && (spinning || --t->yield_countdown == 0)) yield_now();
}

}  // namespace gpm::emu::detail
