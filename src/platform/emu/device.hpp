// Host SIMT emulator: the emulated device. It owns the options, the pool of OS threads that run
// blocks (each with its own block_runner), runs whole grids for the stream machinery, and keeps
// the sticky fault state that CUDA keeps after a kernel fault.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gpm/platform/emulator.hpp>
#include <gpm/platform/launch.cuh>

#include "block.hpp"

namespace gpm::emu::detail {

// Options read from the environment on first use, then changed only by set_options().
options options_from_environment();

class device {
 public:
  static device& get();

  options opts() const;
  void reconfigure(const options& o);  // caller has drained all streams

  // Runs a whole grid on the worker pool and returns when every block has finished; a fault
  // makes the remaining blocks skip and is returned as cudaErrorLaunchFailure.
  cudaError_t run_grid(const kernel_launch& launch);

  // Sticky error after a kernel fault; cleared by cudaDeviceReset.
  cudaError_t sticky() const { return sticky_.load(std::memory_order_acquire); }
  void set_sticky(cudaError_t e, const std::string& report);
  void clear_sticky();
  std::string last_fault() const;

  // Maximum dynamic shared memory per kernel (cudaFuncSetAttribute).
  void set_max_dynamic_shared(const void* kernel, int bytes);
  std::size_t max_dynamic_shared(const void* kernel) const;

  static constexpr std::size_t kDefaultSharedPerBlock = 48 * 1024;
  static constexpr std::size_t kMaxSharedPerBlockOptin = 227 * 1024;
  static constexpr int kMaxThreadsPerMultiprocessor = 1024;

 private:
  struct grid_job;
  device();
  void start_workers(unsigned count);
  void stop_workers();
  void worker_loop(unsigned index);

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  options opts_;
  std::vector<std::thread> workers_;
  std::deque<std::shared_ptr<grid_job>> jobs_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<cudaError_t> sticky_{cudaSuccess};
  std::string last_fault_;
  std::vector<std::pair<const void*, std::size_t>> shared_limits_;
};

}  // namespace gpm::emu::detail
