// The 64-bit checksum of every gpmkit on-media structure (headers, root records, directory
// entries, snapshot pages and manifests). It processes 8-byte words through a bijective mixer,
// so any change confined to one word always changes the result, and otherwise two inputs
// collide with probability about 2^-64. Usable from host and device code. Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>

namespace gpm {

// Checksum of `bytes` bytes at `data`, continuing from `seed` (chain calls to cover several
// ranges; a structure's generation number is a good seed, so that bumping it invalidates the
// old checksum).
GPM_HOST_DEVICE inline std::uint64_t checksum64(const void* data, std::size_t bytes,
                                                std::uint64_t seed = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = mix64(seed ^ 0x6a09e667f3bcc908ull ^ bytes);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  if (i < bytes) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    h = mix64(h ^ w ^ (static_cast<std::uint64_t>(bytes - i) << 59));
  }
  return mix64(h);
}

}  // namespace gpm
