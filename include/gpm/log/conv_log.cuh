// gpm::conv_log: conventional partitioned logging (GPM, ASPLOS'22, §5.2), for small metadata
// logged by one thread of a block or warp (a table size, a counter). The log is split into
// partitions; an operation takes the partition's lock, then appends to (or reads, removes from)
// the partition's stack of entries. The locks are volatile, as locks are in the paper: they live in
// GPU memory, owned by the host object, where contending threads spin on the GPU's L2 instead of
// crossing PCIe to the pool at every attempt, and a crash cannot leave one held. Entries are
// crash-atomic like hcl_log's (persist the entry, then the tail) and checksummed with the
// generation, so a torn entry is never returned. Any thread of any kernel may use any partition:
// there is no geometry. Durability: the pool's.
//
//   gpm::conv_log meta = gpm::conv_log::create(pool, "table-meta", 8, 4096);
//   __global__ void grow(gpm::conv_log_ref meta, table t) {
//     if (threadIdx.x == 0) {
//       if (meta.insert(blockIdx.x % 8, t.size) != gpm::log_status::ok) return;
//       ... update t.size in place, gpm::persist() ...
//     }
//   }
//   // recovery: std::uint64_t old; while (meta.read(p, old) == gpm::log_status::ok) { undo;
//   //                                   meta.remove(p, sizeof old); }
//   meta.clear();  // host: all partitions, one persisted 8-byte store
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

class conv_log_ref {
 public:
  conv_log_ref() = default;

  // Appends `bytes` bytes at src to `partition`, durably. full: it does not fit (nothing is
  // written); bad_partition: no such partition.
  __device__ log_status insert(std::uint32_t partition, const void* src,
                               std::uint32_t bytes) const {
    return locked(partition, [&](const auto& at, const auto& s) {
      return detail::log::append(
          at, s,
          detail::log::byte_source{{static_cast<const unsigned char*>(src), nullptr}, {bytes, 0}});
    });
  }
  // Copies the partition's newest entry to dst without removing it (empty, size_mismatch,
  // corrupt as in hcl_log_ref::read).
  __device__ log_status read(std::uint32_t partition, void* dst, std::uint32_t bytes) const {
    return locked(partition, [&](const auto& at, const auto& s) {
      return detail::log::read_newest(at, s, dst, bytes);
    });
  }
  // Removes the partition's newest entry, which must be `bytes` bytes long.
  __device__ log_status remove(std::uint32_t partition, std::uint32_t bytes) const {
    return locked(partition, [&](const auto& at, const auto& s) {
      return detail::log::remove_newest(at, s, bytes);
    });
  }
  // Removes all of the partition's entries.
  __device__ log_status clear(std::uint32_t partition) const {
    return locked(partition, [&](const auto&, const auto& s) {
      detail::log::clear_stream(s);
      return log_status::ok;
    });
  }
  __device__ log_status newest_size(std::uint32_t partition, std::uint32_t& bytes) const {
    bytes = 0;
    return locked(partition, [&](const auto& at, const auto& s) {
      return detail::log::newest_size(at, s, bytes);
    });
  }
  // Bytes of the partition in use (entries and trailers); 0 for a bad partition.
  __device__ std::uint64_t size(std::uint32_t partition) const {
    std::uint64_t used = 0;
    locked(partition, [&](const auto&, const auto& s) {
      used = detail::log::load_used(s) * detail::log::chunk_bytes;
      return log_status::ok;
    });
    return used;
  }
  __device__ bool is_empty(std::uint32_t partition) const { return size(partition) == 0; }

  template <class T>
  __device__ log_status insert(std::uint32_t partition, const T& value) const {
    return insert(partition, &value, sizeof(T));
  }
  template <class T>
  __device__ log_status read(std::uint32_t partition, T& value) const {
    return read(partition, &value, sizeof(T));
  }

  GPM_HOST_DEVICE std::uint32_t partitions() const {
    return static_cast<std::uint32_t>(v_.streams);
  }

 private:
  friend class conv_log;
  template <class>
  friend struct detail::log::undo_streams;  // conv_undo_tx logs to and rolls back partitions
  template <class>
  friend struct detail::log::log_data;  // undo recovery reads a copy of the data
  conv_log_ref(const detail::log::log_view& v, std::uint32_t* locks) : v_(v), locks_(locks) {}

  // Runs f(layout, stream) on `partition` holding its lock (a device-scope spin lock in GPU memory
  // that backs off with __nanosleep, so the emulator and other warps make progress).
  template <class F>
  __device__ log_status locked(std::uint32_t partition, F&& f) const {
    if (partition >= v_.streams) return v_.report(log_status::bad_partition, partition);
    auto* control = reinterpret_cast<detail::log::partition_control*>(v_.control(partition));
    atomic_ref<std::uint32_t, thread_scope::device> lock(locks_[partition]);
    std::uint32_t expected = 0;
    for (unsigned backoff = 32; !lock.compare_exchange_weak(expected, 1, memory_order_acquire);
         backoff = backoff < 4096 ? backoff * 2 : backoff) {
      expected = 0;
      __nanosleep(backoff);
    }
    const detail::log::packed_layout at{reinterpret_cast<std::uint32_t*>(
        v_.data() + partition * v_.stream_chunks * detail::log::chunk_bytes)};
    const detail::log::stream_ref s{&control->tail, v_.stream_chunks, v_.generation(), partition};
    const log_status st = f(at, s);
    lock.store(0, memory_order_release);
    return v_.report(st, partition);
  }

  detail::log::log_view v_;
  std::uint32_t* locks_ = nullptr;  // one per partition, in GPU memory: 0 free, 1 held
};
static_assert(std::is_trivially_copyable_v<conv_log_ref>);

class conv_log {
 public:
  static constexpr std::uint64_t entry_footprint(std::uint64_t payload_bytes) {
    return detail::log::entry_chunks(payload_bytes) * detail::log::chunk_bytes;
  }
  static std::uint64_t object_bytes(std::uint32_t partitions, std::uint64_t bytes_per_partition);

  // Creates the log as the pool object `name` with `partitions` partitions of
  // `bytes_per_partition` bytes each. Errors as hcl_log::create.
  static conv_log create(pool& p, std::string_view name, std::uint32_t partitions,
                         std::uint64_t bytes_per_partition);
  // Opens the log `name`, validating it.
  static conv_log open(pool& p, std::string_view name);

  conv_log_ref ref() const;
  std::uint32_t partitions() const;
  std::uint64_t bytes_per_partition() const;
  const std::string& name() const { return object_.name(); }

  void clear();  // all partitions: one persisted 8-byte generation increment
  void clear(std::uint32_t partition);
  bool is_empty() const;
  std::uint64_t size(std::uint32_t partition) const;  // bytes in use
  std::uint64_t generation() const { return object_.generation(); }

  void check_faults() const;
  void clear_faults() { object_.clear_faults(); }

 private:
  explicit conv_log(detail::log::log_object o);
  std::uint64_t checked_partition(std::uint32_t partition) const;

  detail::log::log_object object_;
  // The partitions' locks, zeroed (free); allocated where the pool is mapped into a GPU, which
  // ref() needs anyway.
  device_buffer<std::uint32_t> locks_;
};

}  // namespace gpm
