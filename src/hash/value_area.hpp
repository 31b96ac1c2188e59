// The value area's volatile allocator: a bitmap of taken cells (1 = taken), rebuilt from the
// published slots whenever the table is opened, recovered or resized, and a bitmap of retired
// cells (table_view::retired) that reclaim() folds into it in stream order. Nothing of it is
// persistent, so a cell an interrupted operation took is simply free again after a crash.
// Internal to src/hash.
#pragma once

#include <cstdint>

#include <gpm/hash/gphash_ref.cuh>
#include <gpm/platform/runtime.hpp>

namespace gpm::detail::hash {

class value_area {
 public:
  // Both bitmaps for `cells` cells: none retired, none taken but the bits past the last cell.
  void reset(std::uint64_t cells);

  // Its part of the kernels' view.
  void fill(table_view& v) const;

  // Stream-ordered: kernels that follow on `stream` may reuse the cells. `v` is the table's view.
  void reclaim(const table_view& v, cudaStream_t stream) const;

  std::uint64_t cells() const { return cells_; }

 private:
  device_buffer<std::uint64_t> bitmap_;
  std::uint64_t bitmap_words_ = 0;
  std::uint64_t cells_ = 0;
  device_buffer<std::uint64_t> retired_;  // a bit per value cell
  device_buffer<std::uint64_t> cursors_;  // table_view::cursors
};

}  // namespace gpm::detail::hash
