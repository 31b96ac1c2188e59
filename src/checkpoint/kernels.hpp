// The checkpointer's GPU work: digesting a chunk in GPU memory, and copying it into the mapped
// pool with GPU stores while digesting it (the GPM copy path). Both add their digest sum into a
// 64-bit word in GPU memory that the caller zeroes first; chunk_digest_finish turns it into the
// digest. Internal to src/checkpoint.
#pragma once

#include <cstdint>

#include <gpm/platform/runtime.hpp>

namespace gpm::checkpoint_detail {

// How many blocks of kThreads to launch for `bytes`: enough to fill `multiprocessors`.
inline constexpr unsigned kThreads = 256;
unsigned blocks_for(std::uint64_t bytes, int multiprocessors);

// Adds the digest terms of [src, +bytes) (GPU memory, 8-byte aligned) to *sum, on `s`.
void enqueue_digest(const void* src, std::uint64_t bytes, unsigned long long* sum,
                    int multiprocessors, cudaStream_t s);

// Copies [src, +bytes) into `dst` (the GPU's view of pool memory, 8-byte aligned) with GPU stores
// and adds the digest terms to *sum, on `s`. The caller persists the copy once `s` has completed.
void enqueue_copy_digest(void* dst, const void* src, std::uint64_t bytes, unsigned long long* sum,
                         int multiprocessors, cudaStream_t s);

}  // namespace gpm::checkpoint_detail
