// gpm::pool_ref: the small, trivially copyable view of a pool that kernels take by value. It
// turns the offsets stored in persistent structures into pointers in the caller's address space
// (the GPU's mapping of the pool in device code, the host's in host code).
#pragma once

#include <cstdint>
#include <type_traits>

#include <gpm/platform/macros.hpp>

namespace gpm {

struct pool_ref {
  char* base = nullptr;
  std::uint64_t bytes = 0;

  template <class T>
  GPM_HOST_DEVICE T* ptr(std::uint64_t offset) const {
    return reinterpret_cast<T*>(base + offset);
  }
  GPM_HOST_DEVICE std::uint64_t offset_of(const void* p) const {
    return static_cast<std::uint64_t>(static_cast<const char*>(p) - base);
  }
  GPM_HOST_DEVICE bool contains(std::uint64_t offset, std::uint64_t length) const {
    return offset <= bytes && length <= bytes - offset;
  }
};
static_assert(std::is_trivially_copyable_v<pool_ref>);

}  // namespace gpm
