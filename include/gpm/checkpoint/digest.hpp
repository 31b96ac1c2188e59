// The digest of a checkpoint chunk: what redundant-chunk elimination compares and what restore
// verifies. It must be computable at HBM speed by thousands of GPU threads in any order, so it
// is a sum (mod 2^64) of one mixed term per 8-byte word, each term keyed by the word's position:
// a change confined to one word always changes the digest (the mixer is a bijection), reordered
// words change it too, and otherwise two contents collide with probability about 2^-64. The
// final mix folds in the length. Host and device code compute the same value. Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>

namespace gpm {

GPM_HOST_DEVICE inline std::uint64_t chunk_digest_term(std::uint64_t word, std::uint64_t index) {
  return mix64(word ^ (index * 0x9e3779b97f4a7c15ull) ^ 0xd6e8feb86659fd93ull);
}

GPM_HOST_DEVICE inline std::uint64_t chunk_digest_finish(std::uint64_t sum, std::uint64_t bytes) {
  return mix64(sum ^ mix64(bytes + 0x632be59bd9b4e019ull));
}

// The digest of `bytes` bytes at `data` (host memory), equal to what the GPU computes.
inline std::uint64_t chunk_digest(const void* data, std::uint64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t sum = 0;
  std::uint64_t i = 0;
  for (; (i + 1) * 8 <= bytes; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    sum += chunk_digest_term(w, i);
  }
  if (i * 8 < bytes) {  // the last, partial word, zero-padded
    std::uint64_t w = 0;
    std::memcpy(&w, p + i * 8, bytes - i * 8);
    sum += chunk_digest_term(w, i);
  }
  return chunk_digest_finish(sum, bytes);
}

}  // namespace gpm
