// Digest and copy kernel of the checkpointer (see kernels.hpp). One kernel serves every case:
// digest only or digest and copy, one chunk or many, so the digest arithmetic exists once.
#include "kernels.hpp"

#include <algorithm>

#include <gpm/checkpoint/digest.hpp>
#include <gpm/platform/kernel.cuh>

namespace gpm::checkpoint_detail {

namespace {

// The launch's chunks: a table in GPU memory, or one chunk passed by value (table == nullptr).
struct span_list {
  const chunk_span* table;
  chunk_span one;
  std::uint32_t n;
  std::uint64_t tiles;
};

__device__ const chunk_span& span_at(const span_list& l, std::uint32_t k) {
  return l.table == nullptr ? l.one : l.table[k];
}

// The chunk holding `tile`: the last whose first tile is at or before it.
__device__ std::uint32_t span_of(const span_list& l, std::uint64_t tile) {
  std::uint32_t lo = 0;
  std::uint32_t hi = l.n;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (span_at(l, mid).first_tile <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The calling thread's digest terms of bytes [lo, hi) of chunk c (lo a multiple of kTileBytes),
// copying them too when c has a destination. The block's threads share the range: 16-byte pairs
// of words when both pointers allow 16-byte accesses (the widest PCIe store), single words
// otherwise; the chunk's last partial word, zero-padded, by the block's first thread.
template <bool Copy>
__device__ std::uint64_t tile_terms(const chunk_span& c, std::uint64_t lo, std::uint64_t hi) {
  const auto* src = static_cast<const unsigned char*>(c.source);
  auto* dst = static_cast<unsigned char*>(c.copy);
  const std::uint64_t full_words = c.bytes / 8;
  std::uint64_t local = 0;
  std::uint64_t word_begin = lo / 8;
  const bool wide =
      ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16) == 0;
  if (wide) {
    const std::uint64_t pair_end = std::min(hi / 16, full_words / 2);
    const auto* s = reinterpret_cast<const ulonglong2*>(src);
    auto* d = reinterpret_cast<ulonglong2*>(dst);
    for (std::uint64_t p = lo / 16 + threadIdx.x; p < pair_end; p += blockDim.x) {
      const ulonglong2 v = s[p];
      if constexpr (Copy) d[p] = v;
      local += chunk_digest_term(v.x, 2 * p) + chunk_digest_term(v.y, 2 * p + 1);
    }
    word_begin = std::max(word_begin, full_words / 2 * 2);
  }
  const auto* s = reinterpret_cast<const std::uint64_t*>(src);
  auto* d = reinterpret_cast<std::uint64_t*>(dst);
  const std::uint64_t word_end = std::min(hi / 8, full_words);
  for (std::uint64_t w = word_begin + threadIdx.x; w < word_end; w += blockDim.x) {
    const std::uint64_t v = s[w];
    if constexpr (Copy) d[w] = v;
    local += chunk_digest_term(v, w);
  }
  if (threadIdx.x == 0 && hi == c.bytes && full_words * 8 < c.bytes) {
    std::uint64_t v = 0;
    for (std::uint64_t b = full_words * 8; b < c.bytes; ++b) {
      if constexpr (Copy) dst[b] = src[b];
      v |= static_cast<std::uint64_t>(src[b]) << (8 * (b - full_words * 8));
    }
    local += chunk_digest_term(v, full_words);
  }
  return local;
}

// Blocks take tiles in a grid-stride loop; every thread of a block visits the same tiles, so
// each tile's sums are reduced per warp and added atomically once per warp into its chunk's word.
// The copy does not persist: the checkpoint persists a copy's range from the host once the
// stream has completed, on both copy paths (checkpoint.copy.working), and nothing relies on the
// copy being durable earlier, so a fence here would only delay the kernel's end.
__global__ void span_kernel(span_list l, unsigned long long* sums) {
  for (std::uint64_t tile = blockIdx.x; tile < l.tiles; tile += gridDim.x) {
    const std::uint32_t k = span_of(l, tile);
    const chunk_span& c = span_at(l, k);
    const std::uint64_t lo = (tile - c.first_tile) * kTileBytes;
    const std::uint64_t hi = std::min(lo + kTileBytes, c.bytes);
    std::uint64_t local =
        c.copy != nullptr ? tile_terms<true>(c, lo, hi) : tile_terms<false>(c, lo, hi);
    for (int offset = 16; offset > 0; offset /= 2) {
      local += __shfl_down_sync(0xffffffffu, local, offset);
    }
    if (gpm::lane_id() == 0) atomicAdd(sums + k, static_cast<unsigned long long>(local));
  }
}

void launch_spans(const span_list& l, unsigned long long* sums, int multiprocessors,
                  cudaStream_t s) {
  // At most 8 blocks per multiprocessor (a full one at 256 threads), each taking tiles in turn.
  const std::uint64_t cap = static_cast<std::uint64_t>(std::max(multiprocessors, 1)) * 8;
  const auto blocks = static_cast<unsigned>(std::clamp<std::uint64_t>(l.tiles, 1, cap));
  gpm::launch(span_kernel, blocks, kThreads, 0, s, l, sums);
}

}  // namespace

void enqueue_spans(const chunk_span* spans, std::uint32_t n, std::uint64_t tiles,
                   unsigned long long* sums, int multiprocessors, cudaStream_t s) {
  if (n == 0) return;
  launch_spans({spans, {}, n, tiles}, sums, multiprocessors, s);
}

void enqueue_span(const chunk_span& one, unsigned long long* sum, int multiprocessors,
                  cudaStream_t s) {
  chunk_span c = one;
  c.first_tile = 0;
  launch_spans({nullptr, c, 1, tiles_of(c.bytes)}, sum, multiprocessors, s);
}

}  // namespace gpm::checkpoint_detail
