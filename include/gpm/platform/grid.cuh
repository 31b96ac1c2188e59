// Where a thread or a cooperative-group tile stands in the grid, and the tiles kernels work in:
// grid-stride ranges, the per-thread tile (size 1) that gives warp-cooperative code one path for
// every tile size, and reductions over a tile. Every module and workload uses these instead of
// writing `blockIdx.x * blockDim.x + threadIdx.x` loops by hand. One-dimensional grids only
// (gpm::launch's shape); nothing here synchronises or touches memory.
// Include through <gpm/platform/kernel.cuh>.
#pragma once

#include <cstdint>

namespace gpm {

// Index of the calling thread's tile of G threads in the grid, and the number of such tiles
// (G = 1: threads). 64-bit, so grids of more than 2^32 threads' work never wrap.
template <unsigned G = 1>
__device__ inline std::uint64_t tile_index() {
  return (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
}
template <unsigned G = 1>
__device__ inline std::uint64_t tile_count() {
  return static_cast<std::uint64_t>(gridDim.x) * blockDim.x / G;
}

// The indices [begin, end) that the calling tile of G threads visits in a grid-stride loop:
//   for (std::uint64_t i : gpm::grid_stride(n)) out[i] = f(in[i]);
//   for (std::uint64_t i : gpm::grid_stride<32>(n)) op(tile, keys[i]);   // one item per warp
class grid_range {
 public:
  class iterator {
   public:
    __device__ iterator(std::uint64_t i, std::uint64_t step) : i_(i), step_(step) {}
    __device__ std::uint64_t operator*() const { return i_; }
    __device__ iterator& operator++() {
      i_ += step_;
      return *this;
    }
    // Only `it != end()` is asked by range-for: true while the index is inside the range.
    __device__ bool operator!=(const iterator& end) const { return i_ < end.i_; }

   private:
    std::uint64_t i_;
    std::uint64_t step_;
  };

  __device__ grid_range(std::uint64_t first, std::uint64_t end, std::uint64_t step)
      : first_(first), end_(end), step_(step) {}
  __device__ iterator begin() const { return {first_ < end_ ? first_ : end_, step_}; }
  __device__ iterator end() const { return {end_, step_}; }

 private:
  std::uint64_t first_;
  std::uint64_t end_;
  std::uint64_t step_;
};

template <unsigned G = 1>
__device__ inline grid_range grid_stride(std::uint64_t begin, std::uint64_t end) {
  return {begin + tile_index<G>(), end, tile_count<G>()};
}
template <unsigned G = 1>
__device__ inline grid_range grid_stride(std::uint64_t n) {
  return grid_stride<G>(0, n);
}

// The per-thread path of warp-cooperative code: a tile of one thread with the collectives of a
// cooperative-groups tile, so an algorithm written once over `Tile` serves size 1 and size > 1.
struct single_thread {
  static constexpr unsigned int size() { return 1; }
  static constexpr unsigned int num_threads() { return 1; }
  __device__ static unsigned int thread_rank() { return 0; }
  __device__ static unsigned int ballot(int p) { return p ? 1u : 0u; }
  __device__ static bool any(int p) { return p != 0; }
  __device__ static bool all(int p) { return p != 0; }
  template <class T>
  __device__ static T shfl(T v, int) {
    return v;
  }
  template <class T>
  __device__ static T shfl_xor(T v, unsigned int) {
    return v;
  }
  __device__ static void sync() {}
};

// The calling thread's tile of G threads: single_thread for G = 1, else a cooperative-groups
// tile of the block (G a power of two, at most 32).
template <unsigned G>
__device__ inline auto make_tile() {
  if constexpr (G == 1) {
    return single_thread{};
  } else {
    return cg::tiled_partition<G>(cg::this_thread_block());
  }
}

// Maximum of `prio` over the tile, carrying `value` along with it, in every lane. Equal
// priorities go to the larger value, so that every lane ends with the same pair.
template <class Tile>
__device__ inline void tile_max_pair(const Tile& t, std::uint64_t& prio, std::uint64_t& value) {
  for (unsigned int o = t.size() / 2; o > 0; o /= 2) {
    const std::uint64_t p = t.shfl_xor(prio, o);
    const std::uint64_t v = t.shfl_xor(value, o);
    if (p > prio || (p == prio && v > value)) {
      prio = p;
      value = v;
    }
  }
}

}  // namespace gpm
