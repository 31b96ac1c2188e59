// gpm::hcl_log: Hierarchical Coalesced Logging (GPM, ASPLOS'22, §5.2). A persistent log in a
// gpm::pool whose layout mirrors a kernel's grid / block / warp, so every GPU thread inserts at an
// offset computed from its own ids, with no lock; each thread's entry is cut into 4-byte chunks
// striped across 128-byte rows, so a warp inserting together writes whole lines. Each thread
// owns a stack of entries (read and remove take the newest), made crash-atomic by the paper's
// rule: persist the entry, then persist the thread's tail. The geometry (blocks, threads per
// block, bytes per thread) is recorded in the log's header; a kernel launched with another
// geometry gets log_status::wrong_geometry and the host a gpm::error, never a corrupt log.
// Durability: that of the pool (process-crash durable in tmpfs; power-fail on device-DAX;
// snapshot-durable at pool.snapshot()). Layout and protocol: docs/logging.md.
//
//   gpm::hcl_log log = gpm::hcl_log::create(pool, "kv-undo", {blocks, threads, 4 * 64});
//   gpm::launch(update, blocks, threads, 0, nullptr, log.ref(), ...);
//
//   __global__ void update(gpm::hcl_log_ref log, ...) {
//     record old{...};
//     if (log.insert(old) != gpm::log_status::ok) return;  // full, wrong geometry: nothing done
//     ... update in place, gpm::persist() ...
//   }
//   // recovery, same geometry:  record r; while (log.read(r) == gpm::log_status::ok) {
//   //                              undo(r); gpm::persist(); log.remove(sizeof r); }
//   log.check_faults();  // host: throws if any device operation failed
//   log.clear();         // host: truncates every thread's log in one persisted 8-byte store
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <gpm/log/detail/log_object.cuh>
#include <gpm/log/detail/stream.cuh>

namespace gpm {

class pool;
namespace detail::log {
template <class Log>
struct undo_streams;
template <class Ref>
struct log_data;
}

struct hcl_geometry {
  std::uint32_t blocks = 0;             // of the kernels that log
  std::uint32_t threads_per_block = 0;  // of the kernels that log
  // Log space of each thread. An entry of n bytes takes hcl_log::entry_footprint(n) bytes.
  std::uint64_t bytes_per_thread = 0;
};

// The device view: trivially copyable, taken by value by kernels. Every operation acts on the
// calling thread's own log and must be called from a kernel launched with the log's geometry
// (any grid/block shape whose sizes multiply out to blocks and threads_per_block).
class hcl_log_ref {
 public:
  hcl_log_ref() = default;

  // Appends `bytes` bytes at src as this thread's newest entry, durably. full when it does not
  // fit in the space left to the thread (nothing is written then).
  __device__ log_status insert(const void* src, std::uint32_t bytes) const {
    return with_thread([&](const auto& at, const auto& s) {
      return detail::log::append(
          at, s,
          detail::log::byte_source{{static_cast<const unsigned char*>(src), nullptr}, {bytes, 0}});
    });
  }
  // Copies the newest entry to dst without removing it. empty: no entry; size_mismatch: the
  // newest entry has another size; corrupt: it failed its checksum (dst is zeroed).
  __device__ log_status read(void* dst, std::uint32_t bytes) const {
    return with_thread(
        [&](const auto& at, const auto& s) { return detail::log::read_newest(at, s, dst, bytes); });
  }
  // Removes the newest entry, which must be `bytes` bytes long.
  __device__ log_status remove(std::uint32_t bytes) const {
    return with_thread(
        [&](const auto& at, const auto& s) { return detail::log::remove_newest(at, s, bytes); });
  }
  // Removes all of this thread's entries.
  __device__ log_status clear() const {
    return with_thread([&](const auto&, const auto& s) {
      detail::log::clear_stream(s);
      return log_status::ok;
    });
  }
  // The size of the newest entry (status empty when there is none).
  __device__ log_status newest_size(std::uint32_t& bytes) const {
    bytes = 0;
    return with_thread(
        [&](const auto& at, const auto& s) { return detail::log::newest_size(at, s, bytes); });
  }
  // Bytes of this thread's log in use (entries and their trailers); 0 on a geometry error.
  __device__ std::uint64_t size() const {
    std::uint64_t used = 0;
    with_thread([&](const auto&, const auto& s) {
      used = detail::log::load_used(s) * detail::log::chunk_bytes;
      return log_status::ok;
    });
    return used;
  }
  __device__ bool is_empty() const { return size() == 0; }

  template <class T>
  __device__ log_status insert(const T& value) const {
    return insert(&value, sizeof(T));
  }
  template <class T>
  __device__ log_status read(T& value) const {
    return read(&value, sizeof(T));
  }

  GPM_HOST_DEVICE std::uint32_t blocks() const { return v_.blocks; }
  GPM_HOST_DEVICE std::uint32_t threads_per_block() const { return v_.threads_per_block; }

 private:
  friend class hcl_log;
  template <class>
  friend struct detail::log::undo_streams;  // undo_tx logs to and rolls back the thread's stream
  template <class>
  friend struct detail::log::log_data;  // undo recovery reads a copy of the data
  explicit hcl_log_ref(const detail::log::log_view& v) : v_(v) {}

  // Runs f(layout, stream) on the calling thread's log after checking the launch geometry, and
  // reports failures to the fault record.
  template <class F>
  __device__ log_status with_thread(F&& f) const {
    const dim3 g = gridDim, b = blockDim;
    const std::uint64_t grid_blocks = std::uint64_t{g.x} * g.y * g.z;
    const std::uint64_t block_threads = std::uint64_t{b.x} * b.y * b.z;
    if (grid_blocks != v_.blocks || block_threads != v_.threads_per_block) {
      return v_.report(log_status::wrong_geometry, ~std::uint64_t{0});
    }
    const position p = where();
    const detail::log::striped_layout at{v_.data() + p.warp * region_bytes(), p.lane};
    return v_.report(f(at, stream_of(p.stream)), p.stream);
  }

  // The calling thread's place in a kernel of the log's geometry: its stream, and the warp whose
  // region of rows (region_bytes() each) holds the stream in column `lane`.
  struct position {
    std::uint64_t stream, warp;
    std::uint32_t lane;
  };
  __device__ position where() const {
    const dim3 g = gridDim, b = blockDim;
    const std::uint64_t block = blockIdx.x + std::uint64_t{g.x} * (blockIdx.y + g.y * blockIdx.z);
    const std::uint32_t thread = threadIdx.x + b.x * (threadIdx.y + b.y * threadIdx.z);
    return {block * v_.threads_per_block + thread,
            block * v_.warps_per_block + thread / detail::log::warp_lanes,
            thread % detail::log::warp_lanes};
  }
  GPM_HOST_DEVICE std::uint64_t region_bytes() const {
    return v_.stream_chunks * detail::log::line_bytes;
  }
  GPM_HOST_DEVICE detail::log::stream_ref stream_of(std::uint64_t stream) const {
    return {reinterpret_cast<std::uint64_t*>(v_.control(stream)), v_.stream_chunks, v_.generation(),
            stream};
  }

  detail::log::log_view v_;
};
static_assert(std::is_trivially_copyable_v<hcl_log_ref>);

// The host object: owns nothing but the log's identity; the pool owns the storage and must
// outlive it. Host operations must not run while a kernel uses the log.
class hcl_log {
 public:
  // Bytes an entry of `payload_bytes` takes in a thread's log (payload rounded up to 4-byte
  // chunks, plus a 12-byte trailer holding its size and checksum).
  static constexpr std::uint64_t entry_footprint(std::uint64_t payload_bytes) {
    return detail::log::entry_chunks(payload_bytes) * detail::log::chunk_bytes;
  }
  // Pool space an hcl_log of this geometry occupies (the pool needs a little more for itself).
  static std::uint64_t object_bytes(const hcl_geometry& g);

  // Creates the log as the pool object `name`. Throws errc::invalid_argument for a zero or
  // oversized geometry, errc::already_exists if the name is taken, errc::out_of_memory if the
  // pool is too small (saying how much it needs).
  static hcl_log create(pool& p, std::string_view name, const hcl_geometry& g);
  // Opens the log `name` after a restart or crash. Throws errc::not_found, errc::corrupt (bad
  // checksum or sizes), errc::version, errc::layout_mismatch (the object is not an hcl_log).
  static hcl_log open(pool& p, std::string_view name);

  hcl_log_ref ref() const;  // for kernels launched with grid() and block()
  const hcl_geometry& geometry() const { return geometry_; }
  dim3 grid() const { return dim3(geometry_.blocks); }
  dim3 block() const { return dim3(geometry_.threads_per_block); }
  const std::string& name() const { return object_.name(); }

  // Truncates every thread's log: one persisted 8-byte generation increment.
  void clear();
  // Truncates one thread's log.
  void clear(std::uint32_t block, std::uint32_t thread);
  bool is_empty() const;
  // Bytes in use in one thread's log (entries and trailers).
  std::uint64_t size(std::uint32_t block, std::uint32_t thread) const;
  std::uint64_t generation() const { return object_.generation(); }

  // Throws gpm::error describing the first failed device operation (wrong geometry, full,
  // corrupt, size mismatch) since the log was opened or clear_faults(); nothing if none failed.
  void check_faults() const;
  void clear_faults() { object_.clear_faults(); }

 private:
  hcl_log(detail::log::log_object o);
  std::uint64_t stream_of(std::uint32_t block, std::uint32_t thread) const;

  detail::log::log_object object_;
  hcl_geometry geometry_;
};

}  // namespace gpm
