// Small pieces the checkpoint applications share: a grid-stride launch geometry and the one
// deterministic generator of their inputs (no data is downloaded; everything is computed).
#pragma once

#include <algorithm>
#include <cstdint>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>

namespace gpmbench::cp_apps {

// A float in [0, 1) from (stream, index): the same on host and GPU.
GPM_HOST_DEVICE inline float uniform01(std::uint64_t stream, std::uint64_t i) {
  return static_cast<float>(gpm::mix64(stream * 0x9e3779b97f4a7c15ull + i) >> 40) *
         (1.0f / 16777216.0f);
}

// Blocks of 256 threads for `n` elements in a grid-stride loop, at most 4096 blocks.
inline unsigned blocks_for(std::uint64_t n) {
  return static_cast<unsigned>(std::clamp<std::uint64_t>((n + 255) / 256, 1, 4096));
}
inline constexpr unsigned kThreads = 256;

}  // namespace gpmbench::cp_apps
