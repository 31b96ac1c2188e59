// The 16-byte pattern that gpmbench's bandwidth modes write and check (the platform workload's
// streams and sweeps, ooc_ablation_fill's lines): every call writes different data, so a check
// after timing proves that the last call's bytes all arrived.
#pragma once

#include <cstdint>
#include <string>

#include <gpm/platform/kernel.cuh>

#include "gpmbench/resources.hpp"

namespace gpmbench {

// The 16 bytes at index i in call `seed`.
GPM_HOST_DEVICE inline uint4 stream_pattern(std::uint64_t i, unsigned seed) {
  return make_uint4(static_cast<unsigned>(i), static_cast<unsigned>(i >> 32) ^ seed, seed,
                    ~static_cast<unsigned>(i));
}

// Fails the run (check_failed) unless got[0, n) holds call `seed`'s pattern: "<what>: the 16
// bytes at offset <k> are <not_what>".
inline void require_stream_pattern(const uint4* got, std::uint64_t n, unsigned seed,
                                   const std::string& what, const std::string& not_what) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const uint4 want = stream_pattern(i, seed);
    if (got[i].x != want.x || got[i].y != want.y || got[i].z != want.z || got[i].w != want.w) {
      check_failed(what + ": the 16 bytes at offset " + std::to_string(i * sizeof(uint4)) +
                   " are " + not_what);
    }
  }
}

}  // namespace gpmbench
