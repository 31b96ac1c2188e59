// The checkpoint's GPU work: chunks' digests, or their copies into the pool together with the
// digests, by GPU stores or by DMA; and the choice between the two paths, by measuring them.
// A checkpoint's chunks go in batches on the engine's own stream, one kernel launch for all of
// them (a model's hundreds of tensors would otherwise cost a few API calls each); a chunk
// pre-copied on a hint goes alone, on its own stream. Knows nothing of commit records. Internal
// to src/checkpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/platform/elapsed.hpp>
#include <gpm/platform/pinned_buffer.hpp>
#include <gpm/platform/runtime.hpp>

#include "kernels.hpp"

namespace gpm::checkpoint_detail {

using clock = std::chrono::steady_clock;

inline constexpr std::uint64_t kDmaMinBytes = 64 << 10;

// What a checkpoint does with one chunk.
enum class action { digest_first, copy };

// One chunk alone: its bytes in GPU memory and the stream its work runs on.
struct copy_job {
  std::uint32_t index;  // its table index, which names its digest word
  const void* source;
  std::uint64_t bytes;
  const gpm::stream& stream;
};

// One chunk of a batch: digest `source`, and copy it into the pool's copy at `copy_offset`
// (non-zero), or into GPU memory at `gpu_copy` (non-null), or nowhere.
struct batch_job {
  const void* source;
  std::uint64_t bytes;
  std::uint64_t copy_offset = 0;
  void* gpu_copy = nullptr;
};

class copy_engine {
 public:
  copy_engine(pool& p, std::uint32_t max_chunks, copy_path path);
  copy_engine(const copy_engine&) = delete;
  copy_engine& operator=(const copy_engine&) = delete;

  // The stream batches run on; whatever produces their sources must be ordered before them.
  const gpm::stream& stream() const { return stream_; }

  // Enqueues a batch (at most max_chunks jobs) on stream(); pool copies go by `via`, except that
  // on the DMA path chunks under kDmaMinBytes are copied by the digest kernel's stores, running
  // beside the DMAs: a DMA's fixed cost, some microseconds, is more than such a chunk's transfer.
  // The previous batch need not be finished.
  void enqueue_batch(const std::vector<batch_job>& jobs, copy_path via);
  // Waits for stream(); the digests of the last batch's chunks, in its order.
  std::vector<std::uint64_t> finish_batch();

  // Enqueues `a` for one chunk on its own stream; a copy goes into the copy at `copy_offset` in
  // the pool, by `via`.
  void enqueue(action a, const copy_job& j, std::uint64_t copy_offset, copy_path via);
  // Waits for the chunk's stream; the digest of what its last enqueue read.
  std::uint64_t finish(const copy_job& j);

  // Times both copy paths on a chunk (a batch of one on stream()), copying it into the copy at
  // `j.copy_offset` (which no record may reference), and keeps the faster: which one wins depends
  // on the GPU, the link and the pool's pages (docs/checkpointing.md, "How it works").
  void measure(const batch_job& j);

  // The path asked for or measured; automatic until measured.
  copy_path path() const { return path_; }
  // Until measured, GPU stores: the path that needs no measurement to be correct.
  copy_path effective_path() const {
    return path_ == copy_path::automatic ? copy_path::gpu_stores : path_;
  }

 private:
  // A copy of `bytes` at `source` into the pool's copy at `copy_offset`: by DMA on `dma` (returns
  // nullptr), or returns the GPU's view of the copy for the digest kernel's stores.
  void* start_pool_copy(std::uint64_t copy_offset, const void* source, std::uint64_t bytes,
                        bool by_dma, cudaStream_t dma);

  pool* p_;
  copy_path path_;
  int multiprocessors_;
  std::uint32_t max_chunks_;
  gpm::stream stream_{true};
  gpm::stream dma_stream_{true};  // a batch's DMAs, beside its kernel on stream_
  gpm::event forked_, joined_;
  // A batch: its table of chunks (filled here, uploaded to the GPU), each chunk's digest sum.
  pinned_buffer<chunk_span> table_;
  device_buffer<chunk_span> device_table_;
  gpm::event table_uploaded_;  // after the last upload: the host table may be refilled
  device_buffer<unsigned long long> batch_sums_;
  pinned_buffer<unsigned long long> host_batch_sums_;
  std::vector<std::uint64_t> batch_bytes_;  // of the last batch's chunks
  // One chunk alone: per chunk index.
  device_buffer<unsigned long long> sums_;
  pinned_buffer<unsigned long long> host_sums_;
};

}  // namespace gpm::checkpoint_detail
