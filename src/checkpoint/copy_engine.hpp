// The checkpoint's GPU work: a chunk's digest, or its copy into one of its copies in the pool
// together with the digest, by GPU stores or by DMA, on the chunk's stream; and the choice
// between the two paths, by measuring them. Knows nothing of commit records. Internal to
// src/checkpoint.
#pragma once

#include <chrono>
#include <cstdint>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/platform/runtime.hpp>

namespace gpm::checkpoint_detail {

using clock = std::chrono::steady_clock;
double seconds_since(clock::time_point t0);

// What a checkpoint does with one chunk.
enum class action { digest_first, copy };

// One chunk as the copy engine sees it: its bytes in GPU memory and the stream its work runs on.
struct copy_job {
  std::uint32_t index;  // its table index, which names its digest word
  const void* source;
  std::uint64_t bytes;
  const gpm::stream& stream;
};

class copy_engine {
 public:
  copy_engine(pool& p, std::uint32_t max_chunks, copy_path path);
  ~copy_engine();
  copy_engine(const copy_engine&) = delete;
  copy_engine& operator=(const copy_engine&) = delete;

  // Enqueues `a` for the chunk on its stream; a copy goes into the copy at `copy_offset` in the
  // pool, by `via`.
  void enqueue(action a, const copy_job& j, std::uint64_t copy_offset, copy_path via);

  // Waits for the chunk's stream; the digest of what its last enqueue read.
  std::uint64_t finish(const copy_job& j);

  // Times both copy paths on the chunk, copying it into the copy at `copy_offset` (which no
  // record may reference), and keeps the faster: which one wins depends on the GPU, the link and
  // the pool's pages (docs/checkpointing.md, "How it works").
  void measure(const copy_job& j, std::uint64_t copy_offset);

  // The path asked for or measured; automatic until measured.
  copy_path path() const { return path_; }
  // Until measured, GPU stores: the path that needs no measurement to be correct.
  copy_path effective_path() const {
    return path_ == copy_path::automatic ? copy_path::gpu_stores : path_;
  }

 private:
  pool* p_;
  copy_path path_;
  int multiprocessors_;
  device_buffer<unsigned long long> sums_;   // per chunk: the digest sum being computed
  unsigned long long* host_sums_ = nullptr;  // pinned, per chunk
};

}  // namespace gpm::checkpoint_detail
