// gpm::pinned_buffer<T>: owned page-locked host memory on both backends, optionally mapped into
// the GPU's address space (kernels then read and write it across PCIe). Page-locked memory is
// what copy engines transfer asynchronously from and to, and what host threads and kernels share
// while a kernel runs. for_io() allocates it on transparent huge pages, for buffers that files
// are read into and written from. Header only; host code (Linux).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <gpm/platform/error.hpp>
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
  // `count` objects of T, uninitialised, for file I/O (O_DIRECT reads into it, writes from it):
  // anonymous memory on 2 MiB transparent huge pages where the kernel grants them (MADV_HUGEPAGE;
  // buffers of 2 MiB and more), page-locked with cudaHostRegister. An O_DIRECT request reaches the
  // disk in pieces of at most the queue's max_segments physically contiguous runs, so its speed
  // depends on where the buffer's pages fell: on a lent H200 8 MiB reads into cudaHostAlloc buffers
  // of one process took 4.7 to 8.4 ms by buffer, 1.7x apart (docs/out-of-core.md). Without huge
  // pages it is the same memory with the I/O of 4 KiB pages. Not mapped into the GPU.
  static pinned_buffer for_io(std::size_t count) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    constexpr std::size_t kPage = 4096;
    if (count > (std::numeric_limits<std::size_t>::max() - kHuge) / sizeof(T)) {
      throw_error(errc::invalid_argument,
                  "pinned_buffer::for_io: " + std::to_string(count) + " objects overflow");
    }
    const std::size_t bytes = count * sizeof(T) > 0 ? count * sizeof(T) : 1;
    const bool huge = bytes >= kHuge;
    const std::size_t align = huge ? kHuge : kPage;
    const std::size_t length = (bytes + align - 1) / align * align;
    // Over-map by `align` and trim, so that huge pages can back the range from its first byte.
    const std::size_t reserved = length + (huge ? kHuge : 0);
    void* raw =
        ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      throw_error(errc::out_of_memory,
                  "pinned_buffer::for_io: cannot map " + std::to_string(length) + " bytes");
    }
    const auto base = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (base + align - 1) / align * align;
    if (start > base) ::munmap(raw, start - base);
    if (base + reserved > start + length) {
      ::munmap(reinterpret_cast<void*>(start + length), base + reserved - (start + length));
    }
    char* const p = reinterpret_cast<char*>(start);
    if (huge) (void)::madvise(p, length, MADV_HUGEPAGE);           // a hint: 4 KiB pages otherwise
    for (std::size_t at = 0; at < length; at += kPage) p[at] = 0;  // fault the pages in now
    const cudaError_t e = cudaHostRegister(p, length, cudaHostRegisterDefault);
    if (e != cudaSuccess) ::munmap(p, length);
    check_cuda(e, "cudaHostRegister");
    pinned_buffer b;
    b.host_ = reinterpret_cast<T*>(p);
    b.count_ = count;
    b.registered_bytes_ = length;
    return b;
  }
  ~pinned_buffer() { release(); }
  pinned_buffer(pinned_buffer&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)),
        device_(std::exchange(o.device_, nullptr)),
        count_(std::exchange(o.count_, 0)),
        registered_bytes_(std::exchange(o.registered_bytes_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      release();
      host_ = std::exchange(o.host_, nullptr);
      device_ = std::exchange(o.device_, nullptr);
      count_ = std::exchange(o.count_, 0);
      registered_bytes_ = std::exchange(o.registered_bytes_, 0);
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
  void release() noexcept {
    if (host_ == nullptr) return;
    if (registered_bytes_ > 0) {
      cudaHostUnregister(host_);
      ::munmap(host_, registered_bytes_);
    } else {
      cudaFreeHost(host_);
    }
    host_ = nullptr;
  }

  T* host_ = nullptr;
  T* device_ = nullptr;
  std::size_t count_ = 0;
  std::size_t registered_bytes_ = 0;  // for_io: the length mapped and registered
};

}  // namespace gpm
