// Host SIMT emulator: the subset of CUDA cooperative groups gpmkit uses (thread_block and static
// thread_block_tile<N> for N = 1..32), built on the emulated warp intrinsics with the same names
// and return types as <cooperative_groups.h>. Included through <gpm/platform/kernel.cuh> only.
#pragma once

#include <source_location>

#include <gpm/platform/detail/emu/device.hpp>

namespace cooperative_groups {

class thread_block {
 public:
  void sync(std::source_location where = std::source_location::current()) const {
    __syncthreads(where);
  }
  static unsigned int thread_rank() { return ::gpm::emu::detail::this_thread().linear; }
  static unsigned int num_threads() {
    const dim3 d = blockDim;
    return d.x * d.y * d.z;
  }
  static unsigned int size() { return num_threads(); }
  static dim3 group_index() { return blockIdx; }
  static dim3 thread_index() { return threadIdx; }
  static dim3 dim_threads() { return blockDim; }
  static dim3 group_dim() { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block{}; }

template <unsigned int Size, class ParentT = void>
class thread_block_tile;

// A static tile of Size consecutive threads (by linear rank) inside one warp.
template <unsigned int Size>
class thread_block_tile<Size, void> {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "tile sizes are powers of two from 1 to 32");

 public:
  void sync(std::source_location where = std::source_location::current()) const {
    __syncwarp(mask(), where);
  }
  static unsigned int thread_rank() {
    return ::gpm::emu::detail::this_thread().linear & (Size - 1);
  }
  static constexpr unsigned int num_threads() { return Size; }
  static constexpr unsigned int size() { return Size; }
  unsigned int meta_group_rank() const { return meta_rank_; }
  unsigned int meta_group_size() const { return meta_size_; }

  template <class T>
  T shfl(T var, int src_rank, std::source_location where = std::source_location::current()) const {
    return __shfl_sync(mask(), var, src_rank, Size, where);
  }
  template <class T>
  T shfl_up(T var, unsigned int delta,
            std::source_location where = std::source_location::current()) const {
    return __shfl_up_sync(mask(), var, delta, Size, where);
  }
  template <class T>
  T shfl_down(T var, unsigned int delta,
              std::source_location where = std::source_location::current()) const {
    return __shfl_down_sync(mask(), var, delta, Size, where);
  }
  template <class T>
  T shfl_xor(T var, unsigned int lane_mask,
             std::source_location where = std::source_location::current()) const {
    return __shfl_xor_sync(mask(), var, static_cast<int>(lane_mask), Size, where);
  }
  int any(int predicate, std::source_location where = std::source_location::current()) const {
    return __any_sync(mask(), predicate, where);
  }
  int all(int predicate, std::source_location where = std::source_location::current()) const {
    return __all_sync(mask(), predicate, where);
  }
  unsigned int ballot(int predicate,
                      std::source_location where = std::source_location::current()) const {
    return (__ballot_sync(mask(), predicate, where) >> base()) & low_bits();
  }
  template <class T>
  unsigned int match_any(T value,
                         std::source_location where = std::source_location::current()) const {
    return (__match_any_sync(mask(), value, where) >> base()) & low_bits();
  }
  template <class T>
  unsigned int match_all(T value, int& pred,
                         std::source_location where = std::source_location::current()) const {
    return (__match_all_sync(mask(), value, &pred, where) >> base()) & low_bits();
  }

 protected:
  thread_block_tile(unsigned int meta_rank, unsigned int meta_size)
      : meta_rank_(meta_rank), meta_size_(meta_size) {}

 private:
  static constexpr unsigned int low_bits() {
    return Size == 32 ? 0xffffffffu : ((1u << Size) - 1u);
  }
  static unsigned int base() { return ::gpm::emu::detail::this_thread().lane & ~(Size - 1); }
  static unsigned int mask() { return low_bits() << base(); }

  unsigned int meta_rank_;
  unsigned int meta_size_;
};

template <unsigned int Size, class ParentT>
class thread_block_tile : public thread_block_tile<Size, void> {
 public:
  explicit thread_block_tile(const ParentT& parent)
      : thread_block_tile<Size, void>(parent.thread_rank() / Size,
                                      (parent.num_threads() + Size - 1) / Size) {}
};

template <unsigned int Size, class ParentT>
thread_block_tile<Size, ParentT> tiled_partition(const ParentT& parent) {
  return thread_block_tile<Size, ParentT>(parent);
}

}  // namespace cooperative_groups
