// An exclusive prefix sum of n 32-bit values by one block of Threads threads, for the benchmarks'
// small bookkeeping scans (gpKVS's per-region counts, the prefix-sum workload's subarray sums):
// each thread sums a chunk of consecutive values, thread 0 scans the chunk sums, then each thread
// hands its chunk's offsets out. Not a fast scan of large arrays.
#pragma once

#include <algorithm>
#include <cstdint>

#include <gpm/platform/kernel.cuh>

namespace gpmbench {

// Called by every thread of a block of Threads threads: write(i, s) receives, for each i < n, the
// sum of value(0) .. value(i - 1) (mod 2^32). value(i) is read again after write(j, ...) for every
// j < i of the same chunk, so write may replace the values in place.
template <unsigned Threads, class Value, class Write>
__device__ void block_exclusive_scan(std::uint64_t n, Value value, Write write) {
  __shared__ std::uint32_t chunk_sums[Threads];
  const std::uint64_t chunk = (n + Threads - 1) / Threads;
  const std::uint64_t lo = std::min<std::uint64_t>(n, threadIdx.x * chunk);
  const std::uint64_t hi = std::min<std::uint64_t>(n, lo + chunk);
  std::uint32_t sum = 0;
  for (std::uint64_t i = lo; i < hi; ++i) sum += value(i);
  chunk_sums[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t running = 0;
    for (unsigned t = 0; t < Threads; ++t) {
      const std::uint32_t here = chunk_sums[t];
      chunk_sums[t] = running;
      running += here;
    }
  }
  __syncthreads();
  std::uint32_t running = chunk_sums[threadIdx.x];
  for (std::uint64_t i = lo; i < hi; ++i) {
    const std::uint32_t here = value(i);
    write(i, running);
    running += here;
  }
}

}  // namespace gpmbench
