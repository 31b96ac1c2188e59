// GPM's native-persistence commit step for a whole grid: once every thread has persisted its
// results, the last block to finish publishes a progress value (system scope, persisted), and
// that value is what recovery trusts. Data written after the last published value may be partly
// present after a crash; data covered by it is complete.
#pragma once

#include <cstdint>

#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

namespace gpm {

// Called by every thread of every block after it persisted its stores (gpm::persist()).
// `blocks_done` is a zero counter in device memory that the grid's last block resets, so
// consecutive launches in one stream can share it; `progress` lives in the pool. `site` names the
// word's persist for the crash-image checker (gpm::persist_at); the persist names the word's range
// only, so that in the checker's model it does not make the grid's other stores durable for them.
__device__ inline void publish_when_grid_done(unsigned* blocks_done, std::uint64_t* progress,
                                              std::uint64_t value,
                                              const char* site = "publish.grid.progress") {
  __syncthreads();  // every thread of this block has persisted
  if (threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return;
  __threadfence();
  const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
  if (atomicAdd(blocks_done, 1u) != blocks - 1) return;
  __threadfence();  // every block's data is ordered before the publication
  atomic_ref<std::uint64_t, thread_scope::system>(*progress).store(value, memory_order_release);
  persist_at(site, progress, sizeof *progress);
  *blocks_done = 0;  // for the next launch, which starts after this one ends
}

}  // namespace gpm
