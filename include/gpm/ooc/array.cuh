// gpm::ooc::array<T>: the trivially copyable device view of a gpm::ooc::mapping (mapping.cuh)
// that kernels take by value: the mapped file range as an array of T, cached in GPU memory by
// lines. Two ways in:
//
//   element access, any lanes of a warp, any indices:
//     float x;
//     if (a.get(i, x) == gpm::ooc::status::ok) b.set(i, 2 * x);
//   a load whose line is in the GPU cache takes no reference (a seqlock-style read); otherwise,
//   and for stores, lanes of a warp on the same line share one lookup (and one fetch on a miss);
//   a.touch(i) asks for element i's line ahead of time without waiting;
//
//   a line at a time, for coalesced work by a tile (size 1: gpm::single_thread):
//     gpm::ooc::line<float> l;
//     if (a.acquire(tile, i, gpm::ooc::access::read, l) == gpm::ooc::status::ok) {
//       for (std::uint32_t k = tile.thread_rank(); k < l.count; k += tile.size()) use(l.data[k]);
//       a.release(tile, l);
//     }
//   l.data[k] is element l.first + k; every lane of the tile calls with the same index.
//
// A resident mapping (mapping::resident(): all its lines fit the GPU cache and were loaded at map
// time) serves all of these directly from line l's fixed slot, one branch on the view's flag:
// no lookup, no reference, no waiting; acquire() and release() only mark stored lines dirty.
//
// Never read or write past an array's end: accesses there return status::out_of_range. A tile
// may hold a few lines at once, but the lines held across the whole GPU at one time must be fewer
// than the mapping's GPU cache lines, or acquiring waits forever.
#pragma once

#include <cstdint>
#include <type_traits>

#include <gpm/ooc/detail/engine.cuh>
#include <gpm/ooc/status.hpp>

namespace gpm::ooc {

// A line held by a tile: elements [first, first + count) of the array at data[0 .. count).
template <class T>
struct line {
  T* data = nullptr;
  std::uint64_t first = 0;
  std::uint32_t count = 0;
  std::uint32_t slot = 0;
  access intent = access::read;
};

template <class T>
class array {
  static_assert(std::is_trivially_copyable_v<T>, "gpm::ooc::array holds trivially copyable types");

 public:
  using value_type = T;

  array() = default;
  explicit array(const detail::ooc::cache_view& view) : v_(view), size_(view.bytes / sizeof(T)) {}

  GPM_HOST_DEVICE std::uint64_t size() const { return size_; }
  GPM_HOST_DEVICE std::uint32_t elements_per_line() const {
    return static_cast<std::uint32_t>((1ull << v_.line_shift) / sizeof(T));
  }

  // Loads element i into `out`: ok, out_of_range, write_only or io_error (out unchanged).
  __device__ status get(std::uint64_t i, T& out) const {
    if (i >= size_) return status::out_of_range;
    if (v_.mapping_mode == mode::write) return status::write_only;
    const std::uint64_t byte = i * sizeof(T);
    if (v_.resident) {
      out = *reinterpret_cast<const T*>(v_.lines + byte);  // slot l holds line l: no lookup
      return status::ok;
    }
    for (;;) {
      std::uint32_t slot = 0, gen = 0;
      if (detail::ooc::peek(v_, byte >> v_.line_shift, slot, gen)) {
        const T value = *reinterpret_cast<const T*>(at(slot, byte));
        if (detail::ooc::peek_valid(v_, slot, gen)) {
          out = value;
          return status::ok;
        }
      }
      // A miss: this warp fills the line (and holds it), or finds it filled by another warp and
      // reads it through peek like a hit, taking no reference.
      const detail::ooc::warp_hold h =
          detail::ooc::warp_acquire(v_, byte >> v_.line_shift, false, true);
      if (h.st == status::ok && !h.held) continue;
      if (h.st == status::ok) out = *reinterpret_cast<const T*>(at(h.slot, byte));
      detail::ooc::warp_release(v_, h, false);
      return h.st;
    }
  }

  // Stores `value` to element i: ok, out_of_range, read_only or io_error (nothing stored).
  __device__ status set(std::uint64_t i, const T& value) const {
    if (i >= size_) return status::out_of_range;
    if (v_.mapping_mode == mode::read) return status::read_only;
    const std::uint64_t byte = i * sizeof(T);
    if (v_.resident) {
      // No line can leave the GPU while kernels run: the store needs no reference, only the
      // dirty word (and mask) that sync() reads to write it back.
      const auto slot = static_cast<std::uint32_t>(byte >> v_.line_shift);
      *reinterpret_cast<T*>(v_.lines + byte) = value;
      detail::ooc::mark_dirty(v_, slot, detail::ooc::dirty_kind(v_.mapping_mode));
      mark_stored(slot, byte);
      return status::ok;
    }
    const detail::ooc::warp_hold h = detail::ooc::warp_acquire(v_, byte >> v_.line_shift, true);
    if (h.st == status::ok) {
      *reinterpret_cast<T*>(at(h.slot, byte)) = value;
      mark_stored(h.slot, byte);
    }
    detail::ooc::warp_release(v_, h, h.st == status::ok);
    return h.st;
  }

  // Hints that element i will be needed soon and returns at once: if its line is neither in the
  // GPU cache nor being filled, the host I/O threads read it into the host cache (read-ahead),
  // so the miss that follows costs a copy to the GPU, not a file read. Lanes of a warp on one
  // line post it once; hints posted faster than the host takes them may be dropped. ok or
  // out_of_range; mode::write has nothing to fetch (ok, no hint).
  __device__ status touch(std::uint64_t i) const {
    if (i >= size_) return status::out_of_range;
    if (v_.mapping_mode != mode::write && !v_.resident) {
      detail::ooc::post_hint(v_, i * sizeof(T) >> v_.line_shift);
    }
    return status::ok;
  }

  // Every lane of `tile` acquires the line holding element i for `intent`: ok, out_of_range,
  // read_only (a store intent on mode::read), write_only (a load intent on mode::write: only
  // access::write is allowed there) or io_error. On ok, release it with release().
  template <class Tile>
  __device__ status acquire(const Tile& tile, std::uint64_t i, access intent, line<T>& out) const {
    if (i >= size_) return status::out_of_range;
    if (intent != access::read && v_.mapping_mode == mode::read) return status::read_only;
    if (intent != access::write && v_.mapping_mode == mode::write) return status::write_only;
    const std::uint64_t ln = i * sizeof(T) >> v_.line_shift;
    auto slot = static_cast<std::uint32_t>(ln);  // where a resident mapping keeps the line
    std::uint32_t st = 0;
    if (tile.thread_rank() == 0) {
      if (!v_.resident) st = static_cast<std::uint32_t>(detail::ooc::acquire_line(v_, ln, slot));
      if (st == 0 && intent != access::read) {
        // A whole-line write needs no mask: the tile promises to store every element.
        detail::ooc::mark_dirty(v_, slot,
                                intent == access::write ? detail::ooc::kDirtyWhole
                                                        : detail::ooc::dirty_kind(v_.mapping_mode));
      }
    }
    if (!v_.resident) {
      slot = tile.shfl(slot, 0);
      st = tile.shfl(st, 0);
      if (st != 0) return static_cast<status>(st);
    }
    const std::uint64_t first = ln * elements_per_line();
    out.data = reinterpret_cast<T*>(v_.lines + (static_cast<std::uint64_t>(slot) << v_.line_shift));
    out.first = first;
    out.count = static_cast<std::uint32_t>(
        size_ - first < elements_per_line() ? size_ - first : elements_per_line());
    out.slot = slot;
    out.intent = intent;
    return status::ok;
  }

  // Every lane of the tile that acquired `l` releases it, after its last access to l.data.
  template <class Tile>
  __device__ void release(const Tile& tile, const line<T>& l) const {
    if (v_.resident) return;  // it took no reference
    if (l.intent != access::read) atomic_thread_fence<thread_scope::device>(memory_order_release);
    tile.sync();
    if (tile.thread_rank() == 0) detail::ooc::release_line(v_, l.slot);
  }

  // The per-thread line path (tile of one thread).
  __device__ status acquire(std::uint64_t i, access intent, line<T>& out) const {
    return acquire(single_thread{}, i, intent, out);
  }
  __device__ void release(const line<T>& l) const { release(single_thread{}, l); }

  const detail::ooc::cache_view& view() const { return v_; }

 private:
  __device__ std::uint32_t in_line(std::uint64_t byte) const {
    return static_cast<std::uint32_t>(byte & ((1ull << v_.line_shift) - 1));
  }
  // mode::write: the element at `byte` of the line in `slot` was stored (the bytes written back).
  __device__ void mark_stored(std::uint32_t slot, std::uint64_t byte) const {
    if (v_.mapping_mode == mode::write) {
      detail::ooc::mark_written_warp(v_, slot, in_line(byte), sizeof(T));
    }
  }
  __device__ std::byte* at(std::uint32_t slot, std::uint64_t byte) const {
    return v_.lines + (static_cast<std::uint64_t>(slot) << v_.line_shift) + in_line(byte);
  }

  detail::ooc::cache_view v_{};
  std::uint64_t size_ = 0;
};

// Kernels take the view by value.
static_assert(std::is_trivially_copyable_v<array<float>>);

}  // namespace gpm::ooc
