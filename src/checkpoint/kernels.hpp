// The checkpointer's GPU work: digesting chunks in GPU memory, and copying them with GPU stores
// (into the mapped pool: the GPM copy path; or into GPU memory: an asynchronous checkpoint's
// capture) while digesting them. One launch serves any number of chunks, so a checkpoint of a
// model's hundreds of tensors costs a few API calls, not a few per tensor. Each chunk's digest
// terms are added into its own 64-bit word in GPU memory, which the caller zeroes first;
// chunk_digest_finish turns it into the digest. Internal to src/checkpoint.
#pragma once

#include <cstdint>

#include <gpm/platform/runtime.hpp>

namespace gpm::checkpoint_detail {

inline constexpr unsigned kThreads = 256;
// A launch's unit of work: one block digests (and copies) a tile of one chunk, so chunks of any
// sizes share one grid and a block's warps add into one chunk's word per tile.
inline constexpr std::uint64_t kTileBytes = 32 << 10;

// One chunk of a launch. `copy` is the destination (GPU-visible, 8-byte aligned) or nullptr for a
// digest only; `first_tile` is the number of tiles of the launch's chunks before this one.
struct chunk_span {
  const void* source;  // GPU memory, 8-byte aligned
  void* copy;
  std::uint64_t bytes;
  std::uint64_t first_tile;
};

// The tiles a chunk of `bytes` takes (at least one: an empty chunk has none of its own, but none
// is ever registered).
inline std::uint64_t tiles_of(std::uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + kTileBytes - 1) / kTileBytes;
}

// Enqueues the work of `n` chunks on `s`: `spans` (GPU memory, n entries, first_tile filled in)
// taking `tiles` tiles in all; chunk k adds into sums[k].
void enqueue_spans(const chunk_span* spans, std::uint32_t n, std::uint64_t tiles,
                   unsigned long long* sums, int multiprocessors, cudaStream_t s);

// The same for one chunk, passed by value (no table in GPU memory); it adds into *sum.
void enqueue_span(const chunk_span& one, unsigned long long* sum, int multiprocessors,
                  cudaStream_t s);

}  // namespace gpm::checkpoint_detail
