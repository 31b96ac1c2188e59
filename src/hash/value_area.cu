// The value area's volatile allocator (see value_area.hpp) and its reclaim kernel.
#include "value_area.hpp"

#include <algorithm>
#include <vector>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>

#include "kernels.cuh"

namespace gpm::detail::hash {

namespace {

// Allocation cursors (table_view::cursors): more than the blocks a GPU holds at once, so blocks
// running together rarely share one.
constexpr std::uint32_t kCursors = 4096;

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
  std::vector<std::uint64_t> starts(kCursors);
  for (std::uint32_t i = 0; i < kCursors; ++i)
    starts[i] = mix64(i) % std::max<std::uint64_t>(bitmap_words_, 1);
  cursors_ = device_buffer<std::uint64_t>(kCursors);
  cursors_.copy_from_host(starts.data(), starts.size());
}

void value_area::fill(table_view& v) const {
  v.bitmap = bitmap_.data();
  v.bitmap_words = bitmap_words_;
  v.retired = retired_.data();
  v.cursors = cursors_.data();
  v.cursor_mask = kCursors - 1;
}

void value_area::reclaim(const table_view& v, cudaStream_t stream) const {
  launch(reclaim_kernel, blocks_for(bitmap_words_, kScanThreads), kScanThreads, 0, stream, v);
}

}  // namespace gpm::detail::hash
