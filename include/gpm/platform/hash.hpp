// 64-bit mixing for host and device code: the bijective finaliser of splitmix64, used by the
// checksums of on-media structures, by the emulator's seeded schedules, by test seeds and by
// benchmark access patterns. Not cryptographic.
#pragma once

#include <cstdint>

#include <gpm/platform/macros.hpp>

namespace gpm {

// A bijection on 64-bit words that spreads every input bit over the whole output.
GPM_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// splitmix64: the pseudo-random value that follows state `x`.
GPM_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  return mix64(x + 0x9e3779b97f4a7c15ull);
}

}  // namespace gpm
