// Wall time elapsed since a steady_clock time point, for the modules' host-side telemetry
// (recovery, checkpoint and I/O times). Host code.
#pragma once

#include <chrono>
#include <cstdint>

namespace gpm {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace gpm
