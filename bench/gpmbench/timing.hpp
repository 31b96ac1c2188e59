// How gpmbench modes time one repeat: CUDA events around work enqueued on a stream (the GPU's
// own clock; the emulator's events record completion times too), or the host's steady clock
// for work the host does itself.
#pragma once

#include <chrono>
#include <utility>

#include <gpm/platform/runtime.hpp>

namespace gpmbench {

// Seconds between events recorded before and after `enqueue()` on `s`; waits for the stop event,
// so errors of the enqueued work surface here.
template <class F>
double seconds_on_stream(cudaStream_t s, F&& enqueue) {
  gpm::event start;
  gpm::event stop;
  start.record(s);
  std::forward<F>(enqueue)();
  stop.record(s);
  stop.synchronize();
  return stop.elapsed_ms_since(start) * 1e-3;
}

template <class F>
double seconds_on_host(F&& work) {
  const auto t0 = std::chrono::steady_clock::now();
  std::forward<F>(work)();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace gpmbench
