// Digest and copy kernels of the checkpointer (see kernels.hpp). One kernel serves both: the copy
// is a template parameter, so the digest arithmetic exists once.
#include "kernels.hpp"

#include <algorithm>

#include <gpm/checkpoint/digest.hpp>
#include <gpm/platform/kernel.cuh>

namespace gpm::checkpoint_detail {

namespace {

// Every thread digests (and copies) 16-byte pairs of words in a grid-stride loop when both
// pointers allow 16-byte accesses (the widest PCIe store), single words otherwise; the last
// partial word is read byte by byte. Sums are reduced per warp and added atomically once per warp.
// The copy does not persist: the checkpoint persists the copy's range from the host once the
// stream has completed, on both copy paths (checkpoint.copy.working), and nothing relies on the
// copy being durable earlier, so a fence here would only delay the kernel's end.
template <bool Copy>
__global__ void digest_kernel(unsigned char* dst, const unsigned char* src, std::uint64_t bytes,
                              unsigned long long* sum, bool wide) {
  const std::uint64_t full_words = bytes / 8;
  std::uint64_t local = 0;
  std::uint64_t done_words = 0;
  if (wide) {
    const std::uint64_t pairs = full_words / 2;
    const auto* s = reinterpret_cast<const ulonglong2*>(src);
    auto* d = reinterpret_cast<ulonglong2*>(dst);
    for (std::uint64_t p : gpm::grid_stride(pairs)) {
      const ulonglong2 v = s[p];
      if constexpr (Copy) d[p] = v;
      local += chunk_digest_term(v.x, 2 * p) + chunk_digest_term(v.y, 2 * p + 1);
    }
    done_words = pairs * 2;
  }
  const auto* s = reinterpret_cast<const std::uint64_t*>(src);
  auto* d = reinterpret_cast<std::uint64_t*>(dst);
  for (std::uint64_t w : gpm::grid_stride(done_words, full_words)) {
    const std::uint64_t v = s[w];
    if constexpr (Copy) d[w] = v;
    local += chunk_digest_term(v, w);
  }
  if (gpm::tile_index() == 0 && full_words * 8 < bytes) {
    std::uint64_t v = 0;
    for (std::uint64_t b = full_words * 8; b < bytes; ++b) {
      if constexpr (Copy) dst[b] = src[b];
      v |= static_cast<std::uint64_t>(src[b]) << (8 * (b - full_words * 8));
    }
    local += chunk_digest_term(v, full_words);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    local += __shfl_down_sync(0xffffffffu, local, offset);
  }
  if (gpm::lane_id() == 0) atomicAdd(sum, static_cast<unsigned long long>(local));
}

bool wide_ok(const void* a, const void* b) {
  return (reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b)) % 16 == 0;
}

}  // namespace

unsigned blocks_for(std::uint64_t bytes, int multiprocessors) {
  // Eight 16-byte pairs per thread at least, at most 8 blocks per multiprocessor.
  const std::uint64_t wanted = (bytes + kThreads * 128 - 1) / (kThreads * 128);
  const std::uint64_t cap = static_cast<std::uint64_t>(std::max(multiprocessors, 1)) * 8;
  return static_cast<unsigned>(std::clamp<std::uint64_t>(wanted, 1, cap));
}

void enqueue_digest(const void* src, std::uint64_t bytes, unsigned long long* sum,
                    int multiprocessors, cudaStream_t s) {
  const auto* p = static_cast<const unsigned char*>(src);
  gpm::launch(digest_kernel<false>, blocks_for(bytes, multiprocessors), kThreads, 0, s, nullptr, p,
              bytes, sum, wide_ok(p, p));
}

void enqueue_copy_digest(void* dst, const void* src, std::uint64_t bytes, unsigned long long* sum,
                         int multiprocessors, cudaStream_t s) {
  gpm::launch(digest_kernel<true>, blocks_for(bytes, multiprocessors), kThreads, 0, s,
              static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes, sum,
              wide_ok(dst, src));
}

}  // namespace gpm::checkpoint_detail
