// Controls of the host SIMT emulator (host backend only): how many OS threads run blocks, the
// seed that makes in-block interleavings reproducible, and the report of the last kernel fault
// (deadlock, warp-collective misuse, __trap, exception). Every option can also be set from the
// environment, which is how a failing run is reproduced:
//   GPM_EMU_WORKERS=1 GPM_EMU_SEED=<seed> ./test ...
#pragma once

#include <gpm/config.hpp>
#if !GPM_BACKEND_HOST
#error "<gpm/platform/emulator.hpp> is only available in the host backend"
#endif

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpm::emu {

struct options {
  // OS threads that run blocks concurrently (GPM_EMU_WORKERS; 0 = one per hardware thread).
  unsigned workers = 0;
  // 0: threads of a block run round-robin and yield only where they must wait. Otherwise the
  // scheduler picks the next thread at random and also yields at atomics and fences, from this
  // seed (GPM_EMU_SEED). Each block's schedule depends only on the seed, the launch number and
  // the block index, so with workers = 1 a whole run repeats exactly.
  std::uint64_t seed = 0;
  // With a seed: the mean number of atomics/fences between forced yields (GPM_EMU_YIELD_EVERY).
  unsigned yield_every = 4;
  // Stack of each GPU thread (GPM_EMU_STACK_KIB). A guard page below it turns overflow into a
  // crash at the faulting thread instead of silent corruption.
  std::size_t stack_bytes = 256 * 1024;
  // Device memory reported by cudaGetDeviceProperties and enforced by cudaMalloc
  // (GPM_EMU_DEVICE_MIB; 0 = half of physical memory).
  std::size_t device_memory = 0;
  // The blocks of a kernel cudaOccupancyMaxActiveBlocksPerMultiprocessor reports a
  // multiprocessor holds at most (GPM_EMU_BLOCKS_PER_SM; 0 is taken as 1), fewer where their
  // threads or dynamic shared memory would not fit one, as a GPU's would not. Workers still run
  // one block at a time: it changes what occupancy queries answer (tests of code that sizes
  // launches or shared memory by them), not how kernels run.
  unsigned blocks_per_multiprocessor = 1;
};

// The options in force (environment applied on first use of the emulator).
options current_options();

// Replaces the options. Waits for all device work to finish first; the worker pool is resized.
void set_options(const options& o);

// The text of the most recent kernel fault: kernel, block, threads, where each waited, and how to
// reproduce it. Empty if no kernel has faulted since start or the last cudaDeviceReset().
std::string last_fault_report();

}  // namespace gpm::emu
