// What hcl_log and conv_log share: the pool object holding a log (host side: create, validate,
// generation, faults) and the small device view of it (generation, tails, fault reporting).
// Kind-specific geometry lives in hcl_log.cuh / conv_log.cuh; this file must not know it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <gpm/log/detail/format.hpp>
#include <gpm/log/log_status.cuh>
#include <gpm/platform/kernel.cuh>

#include <gpm/pool/pool.hpp>

namespace gpm::detail::log {

// The trivially copyable facts a kernel needs about a log object.
struct log_view {
  char* object = nullptr;  // the object's address in the caller's address space
  std::uint64_t streams = 0;
  std::uint64_t stream_chunks = 0;
  std::uint64_t control_offset = 0;
  std::uint64_t control_stride = 0;
  // Where the streams' chunks are read and written: object + the header's data offset, or in
  // undo recovery a copy of them in GPU memory (read only; see basic_undo_tx::recover).
  char* data_base = nullptr;
  std::uint64_t data_bytes = 0;
  std::uint32_t blocks = 0;
  std::uint32_t threads_per_block = 0;
  std::uint32_t warps_per_block = 0;

  // Only host calls (clear, recover) change the generation, and never while a kernel uses the
  // log, so kernels read it with a plain load that the GPU's caches serve. An acquire load at
  // system scope would send every logging thread's read of this one word across PCIe to the host,
  // where they queue: it made each undo-logged gpKVS SET cost 0.3 us of the whole H100.
  GPM_HOST_DEVICE std::uint64_t generation() const {
    return load_host_written(reinterpret_cast<state*>(object + state_offset)->generation);
  }
  GPM_HOST_DEVICE char* control(std::uint64_t stream) const {
    return object + control_offset + stream * control_stride;
  }
  GPM_HOST_DEVICE char* data() const { return data_base; }

  // Records a failed operation (any status but ok and empty) in the fault record, where the host
  // finds it (check_faults), and returns the status unchanged.
  __device__ log_status report(log_status s, std::uint64_t stream) const {
    if (s == log_status::ok || s == log_status::empty) return s;
    auto* f = reinterpret_cast<fault_record*>(object + fault_offset);
    using a32 = atomic_ref<std::uint32_t, pool_scope>;
    a32(f->mask).fetch_or(log_status_bit(s));
    atomic_ref<std::uint64_t, pool_scope>(f->count).fetch_add(1);
    std::uint32_t expected = 0;
    if (a32(f->claimed).compare_exchange_strong(expected, 1)) {
      f->status = static_cast<std::uint32_t>(s);
      f->stream = stream;
      const dim3 g = gridDim, b = blockDim;
      f->grid[0] = g.x, f->grid[1] = g.y, f->grid[2] = g.z;
      f->block[0] = b.x, f->block[1] = b.y, f->block[2] = b.z;
      a32(f->ready).store(1, memory_order_release);
    }
    return s;
  }
};
static_assert(std::is_trivially_copyable_v<log_view>);

// The host side of a log object (move-only: it claims its pool object). Holds a reference to
// its pool, which must outlive it.
class log_object {
 public:
  log_object() = default;
  // Allocates the object named `name` for header `h` (kind, geometry and common.object_bytes, as
  // make_header gives them) and initialises it crash-safely: the common header is completed and
  // sealed, and written and persisted after everything else, before anything trusts it.
  static log_object create(pool& p, std::string_view name, const header& h);
  // Finds and validates the object: the common object header (format::validate_header), the
  // kind, and every size against the header its stored geometry implies. Resets locks and faults.
  static log_object open(pool& p, std::string_view name, kind k);

  const header& head() const { return head_; }
  const std::string& name() const { return name_; }
  pool& owner() const;
  log_view view() const;       // for kernels (the GPU's mapping)
  log_view host_view() const;  // for host code

  std::uint64_t generation() const;
  // Truncates every stream: one persisted store of generation + 1.
  void next_generation();
  std::uint64_t used_chunks(std::uint64_t stream) const;
  void clear_stream(std::uint64_t stream);
  bool is_empty() const;

  fault_record faults() const;
  void clear_faults();
  // Throws gpm::error naming the first failure device code reported, with `geometry_hint`
  // appended for wrong_geometry; does nothing when no operation failed.
  void check_faults(const std::string& what, const std::string& geometry_hint) const;

 private:
  std::uint64_t* host_tail(std::uint64_t stream) const;

  object_claim claim_;  // the object's, for the handle's life: a second handle is refused
  pool* pool_ = nullptr;
  std::string name_;
  std::uint64_t offset_ = 0;
  header head_{};
};

// The kind, geometry and sizes (common.object_bytes) of a log; create() fills in the rest of the
// common header.
header make_header(kind k, std::uint32_t blocks, std::uint32_t threads_per_block,
                   std::uint64_t streams, std::uint64_t stream_chunks);

}  // namespace gpm::detail::log
