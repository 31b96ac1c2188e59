// The value area's volatile allocator (see value_area.hpp) and its reclaim kernel.
#include "value_area.hpp"

#include <vector>

#include <gpm/platform/kernel.cuh>

#include "kernels.cuh"

namespace gpm::detail::hash {

namespace {

// Makes retired value cells free again: folds the retired bits into the allocator's bitmap.
__global__ void reclaim_kernel(table_view v) {
  for (std::uint64_t w : grid_stride(v.bitmap_words)) {
    const std::uint64_t r = v.retired[w];
    if (r != 0) {
      v.retired[w] = 0;
      atomicAnd(reinterpret_cast<unsigned long long*>(&v.bitmap[w]),
                static_cast<unsigned long long>(~r));
    }
  }
}

}  // namespace

void value_area::reset(std::uint64_t cells) {
  cells_ = cells;
  bitmap_words_ = (cells + 63) / 64;
  std::vector<std::uint64_t> init(bitmap_words_, 0);
  if (cells % 64 != 0) init.back() = ~0ull << (cells % 64);  // cells past the end are taken
  bitmap_ = device_buffer<std::uint64_t>(bitmap_words_);
  bitmap_.copy_from_host(init.data(), init.size());
  retired_ = device_buffer<std::uint64_t>(bitmap_words_);
  retired_.fill_bytes(0);
}

void value_area::fill(table_view& v) const {
  v.bitmap = bitmap_.data();
  v.bitmap_words = bitmap_words_;
  v.retired = retired_.data();
}

void value_area::reclaim(const table_view& v, cudaStream_t stream) const {
  launch(reclaim_kernel, blocks_for(bitmap_words_, kScanThreads), kScanThreads, 0, stream, v);
}

}  // namespace gpm::detail::hash
