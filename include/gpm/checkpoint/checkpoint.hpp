// gpm::checkpointer: crash-consistent checkpoints of GPU buffers in a gpm::pool. It unites the
// GPM paper's checkpoint groups (ASPLOS'22 §5.3: two copies of every buffer on media, a working
// and a consistent one, and an atomic flip) with HeteroCheckpoint's chunks (DSN'14: buffers are
// named, pre-copy hints, redundant-chunk elimination by checksums with a 2-bit predictor, one
// stream per chunk). A crash at any moment leaves the last completed checkpoint of every group
// restorable; a corrupt copy is detected by its checksum at restore, never silently used.
//
// Durability: a completed checkpoint() survives a crash of the process (the pool is host memory);
// with checkpoint_options::snapshot_every it also survives power loss (the pool's disk snapshot).
// Not for pointer-based structures: a chunk is restored byte for byte. Host code only.
// On-media format: include/gpm/checkpoint/format.hpp; guide: docs/checkpointing.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <gpm/platform/runtime.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm {

// How chunk bytes travel from GPU memory into the pool.
enum class copy_path {
  automatic,   // measure both on the first checkpoint and keep the faster
  gpu_stores,  // a kernel stores into the mapped pool (GPM), checksumming on the way
  dma,         // cudaMemcpyAsync into the pool (the copy engines), checksummed by a kernel
};
std::string_view to_string(copy_path p) noexcept;

struct checkpoint_options {
  std::uint32_t max_chunks = 64;  // chunks the checkpoint can hold (create only)
  copy_path path = copy_path::automatic;
  // Skip chunks whose checksum equals the consistent copy's (HeteroCheckpoint's redundant-chunk
  // elimination). Chunks the 2-bit predictor expects to change are copied without the separate
  // checksum pass; the copy computes their checksum.
  bool eliminate_redundant = true;
  bool honour_precopy = true;  // false: precopy() hints are ignored (to measure their effect)
  // Snapshot the pool to disk after every n-th completed checkpoint (0: never): the checkpoint
  // then also survives power loss (docs/pool.md, "Durability").
  std::uint32_t snapshot_every = 0;
  // Where notices go (a chunk restored from its older copy, the copy path chosen). Default:
  // stderr.
  std::function<void(const std::string&)> notice;
};

// A stable tag of T's representation, stored with a chunk so that restoring into a buffer of
// another element type is an error. Types of the same size and kind (integer, signed, floating
// point) share a tag; pass your own tag to add() to tell such types apart.
template <class T>
constexpr std::uint64_t checkpoint_type_tag() {
  return 0x6370000000000000ull | (std::uint64_t{sizeof(T)} << 8) |
         (std::is_floating_point_v<T> ? 4u : 0u) | (std::is_integral_v<T> ? 2u : 0u) |
         (std::is_signed_v<T> ? 1u : 0u);
}

struct chunk_info {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint64_t type_tag = 0;
  std::uint32_t group = 0;
  std::uint64_t last_seq = 0;  // the checkpoint whose data the consistent copy holds (0: none)
  bool attached = false;       // a GPU buffer is registered for it in this process
};

struct checkpoint_result {
  std::uint64_t seq = 0;  // this checkpoint's number (1 for the first of the checkpointer)
  std::uint32_t chunks = 0;
  std::uint32_t copied = 0;        // chunks written to the working copy and flipped
  std::uint32_t redundant = 0;     // chunks skipped because their checksum did not change
  std::uint32_t precopied = 0;     // chunks whose copy had started at a precopy() hint
  std::uint32_t mispredicted = 0;  // chunks predicted unchanged that had changed
  std::uint64_t bytes_copied = 0;
  copy_path path = copy_path::automatic;  // the path used
  bool snapshotted = false;               // power-loss durable too
  double seconds = 0;                     // from the call to durability
};

struct restore_result {
  std::uint64_t seq = 0;  // the newest checkpoint restored from
  std::uint32_t chunks = 0;
  std::uint64_t bytes = 0;
  // Chunks whose consistent copy failed its checksum and that were restored from the other,
  // older copy instead, in words ("weights: copy of checkpoint 7 is corrupt; restored ...").
  std::vector<std::string> repaired;
  double seconds = 0;
};

class checkpointer;

// A checkpoint that checkpoint_async() has started: GPU state is captured, the persist runs in
// the background. get() waits and returns the result or rethrows the failure.
class pending_checkpoint {
 public:
  pending_checkpoint() = default;
  checkpoint_result get() const { return future_.get(); }
  bool ready() const;
  bool valid() const { return future_.valid(); }

 private:
  friend class checkpointer;
  explicit pending_checkpoint(std::shared_future<checkpoint_result> f) : future_(std::move(f)) {}
  std::shared_future<checkpoint_result> future_;
};

class checkpointer {
 public:
  // Creates the checkpoint `name` (1 to 31 bytes) in `pool`, which must outlive it. Fails with
  // already_exists if the pool holds one of that name, out_of_memory if the pool is too small.
  static checkpointer create(pool& pool, std::string_view name, checkpoint_options options = {});
  // Opens an existing checkpoint, validating its header, chunk table and commit records.
  static checkpointer open(pool& pool, std::string_view name, checkpoint_options options = {});
  // Opens the checkpoint if it exists, else creates it.
  static checkpointer open_or_create(pool& pool, std::string_view name,
                                     checkpoint_options options = {});
  static bool exists(const pool& pool, std::string_view name);

  checkpointer(checkpointer&&) noexcept;
  checkpointer& operator=(checkpointer&&) noexcept;
  ~checkpointer();  // waits for a pending asynchronous checkpoint

  // Registers `bytes` of GPU memory at `device_ptr` (8-byte aligned) as chunk `name` (1 to 63
  // bytes) of `group`. The first time a name is seen its two copies are allocated in the pool;
  // after a restart the same name finds them again, in any registration order. Registering a
  // name again with another size, type tag or group is an error (invalid_argument) that names
  // both. Registering the same name again with the same description re-attaches it to a new
  // buffer.
  void add(std::string_view name, void* device_ptr, std::uint64_t bytes, std::uint32_t group = 0,
           std::uint64_t type_tag = 0);
  template <class T>
  void add(std::string_view name, T* device_ptr, std::size_t count, std::uint32_t group = 0) {
    add(name, static_cast<void*>(device_ptr), count * sizeof(T), group, checkpoint_type_tag<T>());
  }

  // Pre-copy hint: chunk `name` will not change before the next checkpoint of its group. Its copy
  // (or its checksum, if the predictor expects it unchanged) starts now on the chunk's stream,
  // after the work already enqueued on `after`, overlapping the kernels that follow.
  void precopy(std::string_view name, cudaStream_t after = nullptr);

  // Copies the group's chunks into their working copies, persists them, and flips them atomically
  // to consistent. Runs after the work enqueued on `stream`; returns once durable.
  checkpoint_result checkpoint(std::uint32_t group = 0, cudaStream_t stream = nullptr);
  // The same, returning as soon as the group's GPU state is captured (a device-to-device copy,
  // which work enqueued later on `stream` waits for); the persist completes in the background.
  // One checkpoint runs at a time: a later call waits for a pending one.
  pending_checkpoint checkpoint_async(std::uint32_t group = 0, cudaStream_t stream = nullptr);

  // Copies the consistent copies of the group's chunks into their registered buffers, verifying
  // every chunk's checksum. Fails with not_found if the group has no completed checkpoint or a
  // chunk of it was never checkpointed, corrupt (naming the chunk) if a chunk's copies both fail.
  restore_result restore(std::uint32_t group = 0, cudaStream_t stream = nullptr);

  // The newest completed checkpoint of the group (0: none).
  std::uint64_t last_checkpoint(std::uint32_t group = 0) const;
  std::vector<chunk_info> chunks() const;
  // The path checkpoints use (automatic until the first checkpoint has measured both).
  copy_path chosen_path() const;
  // Writes the pool's changed pages to disk: what completed checkpoints hold survives power loss.
  snapshot_result snapshot();
  const std::string& name() const;

  // Waits for a pending asynchronous checkpoint and releases the streams and GPU memory.
  void close();

  struct impl;

 private:
  explicit checkpointer(std::unique_ptr<impl> impl);
  impl& live() const;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpm
