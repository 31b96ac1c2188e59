// Host SIMT emulator: CUDA's device-side language for g++. Keywords become plain C++, built-in
// variables read the current fiber's context, and every synchronising intrinsic goes through the
// emulator's scheduler so that barriers and warp collectives behave as CUDA specifies (and
// mistakes are reported, not hung on). Included through <gpm/platform/kernel.cuh> only.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include <gpm/platform/detail/emu/runtime_api.hpp>
#include <gpm/platform/detail/emu/thread_context.hpp>

// ---- keywords -------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(...)
// One block runs on an OS thread at a time and all its GPU threads are fibers of that OS
// thread, so a thread_local is exactly "one instance per running block".
#define __shared__ thread_local

// ---- built-in variables ---------------------------------------------------------------------
#define threadIdx (::gpm::emu::detail::this_thread().thread_idx)
#define blockIdx (::gpm::emu::detail::this_thread().block->block_idx)
#define blockDim (::gpm::emu::detail::this_thread().block->block_dim)
#define gridDim (::gpm::emu::detail::this_thread().block->grid_dim)
inline constexpr int warpSize = 32;

namespace gpm::emu::detail {

template <class T>
inline constexpr bool is_warp_value = std::is_arithmetic_v<T> &&
                                      (sizeof(T) == 4 || sizeof(T) == 8) &&
                                      !std::is_same_v<T, bool>;

template <class T>
std::uint64_t to_bits(T v) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<std::uint32_t>(v);
  } else {
    return std::bit_cast<std::uint64_t>(v);
  }
}

template <class T>
T from_bits(std::uint64_t bits) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(static_cast<std::uint32_t>(bits));
  } else {
    return std::bit_cast<T>(bits);
  }
}

template <class T>
T shuffle(warp_op op, unsigned mask, T var, int arg, int width, const std::source_location& where) {
  static_assert(is_warp_value<T>, "warp shuffles take 4- or 8-byte arithmetic values");
  return from_bits<T>(warp_collective(op, mask, to_bits(var), arg, width, where).value);
}

template <class T, class Op>
T atomic_rmw(T* address, Op op) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, op(old), std::memory_order_relaxed)) {
  }
  atomic_point();
  return old;
}

}  // namespace gpm::emu::detail

// ---- barriers, fences -----------------------------------------------------------------------
inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ::gpm::emu::detail::block_barrier(::gpm::emu::detail::barrier_op::sync, 1, where);
}
inline int __syncthreads_count(int predicate,
                               std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::block_barrier(::gpm::emu::detail::barrier_op::count, predicate, where);
}
inline int __syncthreads_and(int predicate,
                             std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::block_barrier(::gpm::emu::detail::barrier_op::all, predicate, where);
}
inline int __syncthreads_or(int predicate,
                            std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::block_barrier(::gpm::emu::detail::barrier_op::any, predicate, where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location where = std::source_location::current()) {
  ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::sync, mask, 0, 0, 32, where);
}
inline void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ::gpm::emu::detail::atomic_point();
}
inline void __threadfence() { __threadfence_block(); }
inline void __threadfence_system() { __threadfence_block(); }

// ---- warp vote, match, reduce -----------------------------------------------------------------
inline unsigned __activemask(std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::active_mask(where);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  return static_cast<unsigned>(
      ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::ballot, mask, predicate != 0,
                                          0, 32, where)
          .value);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::any, mask, predicate != 0,
                                             0, 32, where)
      .predicate;
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::all, mask, predicate != 0,
                                             0, 32, where)
      .predicate;
}
template <class T>
unsigned __match_any_sync(unsigned mask, T value,
                          std::source_location where = std::source_location::current()) {
  static_assert(::gpm::emu::detail::is_warp_value<T>, "__match_any_sync takes 4- or 8-byte values");
  return static_cast<unsigned>(
      ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::match_any, mask,
                                          ::gpm::emu::detail::to_bits(value), sizeof(T), 32, where)
          .value);
}
template <class T>
unsigned __match_all_sync(unsigned mask, T value, int* pred,
                          std::source_location where = std::source_location::current()) {
  static_assert(::gpm::emu::detail::is_warp_value<T>, "__match_all_sync takes 4- or 8-byte values");
  auto r =
      ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::match_all, mask,
                                          ::gpm::emu::detail::to_bits(value), sizeof(T), 32, where);
  *pred = r.predicate;
  return static_cast<unsigned>(r.value);
}

#define GPM_EMU_WARP_REDUCE(name, T, op)                                                     \
  inline T name(unsigned mask, T value,                                                      \
                std::source_location where = std::source_location::current()) {              \
    return static_cast<T>(                                                                   \
        ::gpm::emu::detail::warp_collective(::gpm::emu::detail::warp_op::op, mask,           \
                                            static_cast<std::uint32_t>(value), 0, 32, where) \
            .value);                                                                         \
  }
GPM_EMU_WARP_REDUCE(__reduce_add_sync, unsigned, reduce_add)
GPM_EMU_WARP_REDUCE(__reduce_add_sync, int, reduce_add)
GPM_EMU_WARP_REDUCE(__reduce_min_sync, unsigned, reduce_min_unsigned)
GPM_EMU_WARP_REDUCE(__reduce_min_sync, int, reduce_min_signed)
GPM_EMU_WARP_REDUCE(__reduce_max_sync, unsigned, reduce_max_unsigned)
GPM_EMU_WARP_REDUCE(__reduce_max_sync, int, reduce_max_signed)
GPM_EMU_WARP_REDUCE(__reduce_and_sync, unsigned, reduce_and)
GPM_EMU_WARP_REDUCE(__reduce_or_sync, unsigned, reduce_or)
GPM_EMU_WARP_REDUCE(__reduce_xor_sync, unsigned, reduce_xor)
#undef GPM_EMU_WARP_REDUCE

// ---- warp shuffles --------------------------------------------------------------------------
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::shuffle(::gpm::emu::detail::warp_op::shfl_idx, mask, var, src_lane,
                                     width, where);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                 std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::shuffle(::gpm::emu::detail::warp_op::shfl_up, mask, var,
                                     static_cast<int>(delta), width, where);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                   std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::shuffle(::gpm::emu::detail::warp_op::shfl_down, mask, var,
                                     static_cast<int>(delta), width, where);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location where = std::source_location::current()) {
  return ::gpm::emu::detail::shuffle(::gpm::emu::detail::warp_op::shfl_xor, mask, var, lane_mask,
                                     width, where);
}

// ---- bit manipulation -----------------------------------------------------------------------
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return std::countl_zero(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
template <class T>
T __ldg(const T* p) {
  return *p;
}

// ---- min/max: CUDA declares these overloads for device (and host) code in .cu files ---------
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return a < b ? a : b; }
inline double min(double a, double b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return a > b ? a : b; }
inline double max(double a, double b) { return a > b ? a : b; }

// ---- time -----------------------------------------------------------------------------------
// The emulator's clock counts nanoseconds; cudaDevAttrClockRate reports 1 GHz to match.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void __nanosleep(unsigned) { ::gpm::emu::detail::yield_now(); }
[[noreturn]] inline void __trap(std::source_location where = std::source_location::current()) {
  ::gpm::emu::detail::fault("__trap() called", where);
}

// ---- atomics (relaxed, like CUDA's atomicXxx; the scope suffix does not change host atomics) --
#define GPM_EMU_ATOMIC_SCOPES(ret, name, params, body)                                            \
  inline ret name params body inline ret name##_block params body inline ret name##_system params \
      body

#define GPM_EMU_ATOMIC_RMW(name, T, expr)                                                          \
  GPM_EMU_ATOMIC_SCOPES(T, name, (T * address, T val), {                                           \
    return ::gpm::emu::detail::atomic_rmw(address, [val](T old) { return static_cast<T>(expr); }); \
  })

#define GPM_EMU_ATOMIC_INTEGER_FAMILY(T)                  \
  GPM_EMU_ATOMIC_RMW(atomicAdd, T, old + val)             \
  GPM_EMU_ATOMIC_RMW(atomicSub, T, old - val)             \
  GPM_EMU_ATOMIC_RMW(atomicExch, T, ((void)old, val))     \
  GPM_EMU_ATOMIC_RMW(atomicMin, T, val < old ? val : old) \
  GPM_EMU_ATOMIC_RMW(atomicMax, T, val > old ? val : old) \
  GPM_EMU_ATOMIC_RMW(atomicAnd, T, old& val)              \
  GPM_EMU_ATOMIC_RMW(atomicOr, T, old | val)              \
  GPM_EMU_ATOMIC_RMW(atomicXor, T, old ^ val)

GPM_EMU_ATOMIC_INTEGER_FAMILY(int)
GPM_EMU_ATOMIC_INTEGER_FAMILY(unsigned int)
GPM_EMU_ATOMIC_INTEGER_FAMILY(unsigned long long)
GPM_EMU_ATOMIC_RMW(atomicMin, long long, val < old ? val : old)
GPM_EMU_ATOMIC_RMW(atomicMax, long long, val > old ? val : old)
GPM_EMU_ATOMIC_RMW(atomicAdd, float, old + val)
GPM_EMU_ATOMIC_RMW(atomicAdd, double, old + val)
GPM_EMU_ATOMIC_RMW(atomicExch, float, ((void)old, val))
GPM_EMU_ATOMIC_RMW(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
GPM_EMU_ATOMIC_RMW(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)

#define GPM_EMU_ATOMIC_CAS(T)                                                             \
  GPM_EMU_ATOMIC_SCOPES(T, atomicCAS, (T * address, T compare, T val), {                  \
    std::atomic_ref<T> ref(*address);                                                     \
    T expected = compare;                                                                 \
    bool swapped = ref.compare_exchange_strong(expected, val, std::memory_order_relaxed); \
    ::gpm::emu::detail::atomic_point(!swapped);                                           \
    return expected;                                                                      \
  })
GPM_EMU_ATOMIC_CAS(int)
GPM_EMU_ATOMIC_CAS(unsigned int)
GPM_EMU_ATOMIC_CAS(unsigned long long)
GPM_EMU_ATOMIC_CAS(unsigned short)

#undef GPM_EMU_ATOMIC_CAS
#undef GPM_EMU_ATOMIC_INTEGER_FAMILY
#undef GPM_EMU_ATOMIC_RMW
#undef GPM_EMU_ATOMIC_SCOPES
