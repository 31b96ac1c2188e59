// The host-side runtime surface gpmkit code calls on both backends: the CUDA runtime API (the real
// one in CUDA builds, the host SIMT emulator's in host builds), a checked-call helper that turns a
// failed call into gpm::error, and small owning wrappers for streams, events and device memory.
// Host code includes this; kernel sources include <gpm/platform/kernel.cuh>, which includes it.
#pragma once

#include <cstddef>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>

#include <gpm/config.hpp>
#if GPM_BACKEND_CUDA
#include <cuda_runtime_api.h>
#else
#include <gpm/platform/detail/emu/runtime_api.hpp>
#endif
#include <gpm/platform/error.hpp>

namespace gpm {

// Throws errc::cuda naming `what`, the CUDA error and the caller's location unless `status` is
// cudaSuccess; then clears the runtime's last error (cudaGetLastError), which the exception
// reports, so later launch checks do not report it again.
void check_cuda(cudaError_t status, std::string_view what,
                std::source_location where = std::source_location::current());

namespace detail {
// "(x,y,z)" and "file:line", as messages and fault reports write them.
std::string format_dims(dim3 d);
std::string format_site(const std::source_location& where);

// Throws errc::cuda for a failed launch, naming its call site and configuration (gpm::launch),
// and, where the block is more than `kernel` takes, what it takes and why (its registers).
[[noreturn]] void throw_launch_error(cudaError_t status, const void* kernel, dim3 grid,
                                     dim3 block, std::size_t shared_bytes,
                                     const std::source_location& site);
}  // namespace detail

// What the current device is: a GPU, or the host SIMT emulator standing in for one.
struct device_info {
  bool emulated = false;
  bool present = false;  // false when a CUDA build finds no GPU
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::size_t global_memory = 0;
  int pci_domain = 0;
  int pci_bus = 0;
  int pci_device = 0;
  int pcie_generation = 0;  // current PCIe link generation from sysfs (0: unknown, or emulated)
  int pcie_width = 0;       // current PCIe link width in lanes (0: unknown)
  bool can_map_host_memory = false;
  bool pageable_memory_access = false;  // HMM: kernels may dereference any host pointer
  bool host_native_atomics = false;
  bool concurrent_managed_access = false;
  std::string absent_reason;  // why no device was found, when present is false
};
device_info query_device();

// An owned CUDA stream (non-blocking with respect to the legacy default stream when asked).
class stream {
 public:
  explicit stream(bool non_blocking = false);
  ~stream();
  stream(stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  cudaStream_t get() const noexcept { return handle_; }
  operator cudaStream_t() const noexcept { return handle_; }
  void synchronize() const;

 private:
  cudaStream_t handle_ = nullptr;
};

// An owned CUDA event with timing enabled.
class event {
 public:
  event();
  ~event();
  event(event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  cudaEvent_t get() const noexcept { return handle_; }
  void record(cudaStream_t s = nullptr);
  void synchronize() const;
  // Whether the work before the last record() is done, without waiting.
  bool done() const;
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const event& start) const;

 private:
  cudaEvent_t handle_ = nullptr;
};

// Owned device memory for `count` objects of T (uninitialised).
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t count) : count_(count) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, count * sizeof(T) > 0 ? count * sizeof(T) : 1), "cudaMalloc");
    data_ = static_cast<T*>(p);
  }
  ~device_buffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  device_buffer(device_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      if (data_ != nullptr) cudaFree(data_);
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  void copy_from_host(const T* src, std::size_t count) {
    require(count <= count_, "device_buffer::copy_from_host: more elements than the buffer holds");
    check_cuda(cudaMemcpy(data_, src, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  void copy_to_host(T* dst, std::size_t count) const {
    require(count <= count_, "device_buffer::copy_to_host: more elements than the buffer holds");
    check_cuda(cudaMemcpy(dst, data_, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  void fill_bytes(int value) { check_cuda(cudaMemset(data_, value, bytes()), "cudaMemset"); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace gpm
