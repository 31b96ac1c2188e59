// gpm::pinned_buffer<T>: owned page-locked host memory on both backends, optionally mapped into
// the GPU's address space (kernels then read and write it across PCIe). Page-locked memory is
// what copy engines transfer asynchronously from and to, and what host threads and kernels share
// while a kernel runs. Header only; host code.
#pragma once

#include <cstddef>
#include <utility>

#include <gpm/platform/runtime.hpp>

namespace gpm {

template <class T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  // `count` objects of T, uninitialised; `mapped`: also addressable by kernels (device_data()).
  explicit pinned_buffer(std::size_t count, bool mapped = false) : count_(count) {
    void* p = nullptr;
    check_cuda(cudaHostAlloc(&p, count * sizeof(T) > 0 ? count * sizeof(T) : 1,
                             mapped ? cudaHostAllocMapped : cudaHostAllocDefault),
               "cudaHostAlloc");
    host_ = static_cast<T*>(p);
    if (mapped) {
      void* d = nullptr;
      const cudaError_t e = cudaHostGetDevicePointer(&d, p, 0);
      if (e != cudaSuccess) cudaFreeHost(p);
      check_cuda(e, "cudaHostGetDevicePointer");
      device_ = static_cast<T*>(d);
    }
  }
  ~pinned_buffer() {
    if (host_ != nullptr) cudaFreeHost(host_);
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)),
        device_(std::exchange(o.device_, nullptr)),
        count_(std::exchange(o.count_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      if (host_ != nullptr) cudaFreeHost(host_);
      host_ = std::exchange(o.host_, nullptr);
      device_ = std::exchange(o.device_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;

  T* data() const noexcept { return host_; }
  // The same memory as kernels address it (null unless constructed `mapped`).
  T* device_data() const noexcept { return device_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

 private:
  T* host_ = nullptr;
  T* device_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace gpm
