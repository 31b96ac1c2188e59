// The kernel behind gpm::tx_heap::launch: worker threads run the caller's body; in helpers mode
// the block also holds the persistence ring in its dynamic shared memory and one or two helper
// warps after the workers, which drain the ring until the workers are done (TPDS'20 §4.1).
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/tx/detail/engine.cuh>
#include <gpm/tx/tx_ref.cuh>

namespace gpm::detail::tx {

// What tx_heap::launch computed for one launch.
struct launch_plan {
  heap_view view;  // workers_per_block and ring_chunks set
  std::uint32_t blocks = 0;
  std::uint32_t threads_per_block = 0;  // workers, then helper warps
  std::size_t shared_bytes = 0;
};

template <class Body>
__global__ void launch_kernel(heap_view v, Body body) {
  if (v.ring_chunks != 0) {
    v.ring = dynamic_shared_memory<ring_control>();
    init_ring(v);
  }
  const std::uint64_t persisted = persisted_at_start(v);
  v.log_key = log_seed(v.salt, v.epoch, log_of(v));
  if (threadIdx.x < v.workers_per_block) {
    body(tx_ref(v));
    if (v.ring != nullptr) blk32(v.ring->workers_done).fetch_add(1, memory_order_release);
  } else {
    drain_ring(v);
  }
  finish_launch(v, persisted);
}

}  // namespace gpm::detail::tx
