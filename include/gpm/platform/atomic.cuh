// Scoped atomics and fences for kernel and host code on both backends. The memory scope is a
// template parameter (as in cuCollections): gpm::atomic_ref<T, gpm::thread_scope::device>.
// A scope names who observes the access, not where the memory lies, and it is not durability:
// gpm::persist() makes stores durable whatever their scope. CUDA builds use cuda::atomic_ref;
// host builds use std::atomic_ref and let the emulator interleave GPU threads at each atomic.
// Include through <gpm/platform/kernel.cuh>.
#pragma once

#include <cstring>

#include <gpm/config.hpp>
#include <gpm/platform/macros.hpp>
#if GPM_BACKEND_CUDA
#include <cuda/atomic>
#else
#include <atomic>
#include <gpm/platform/detail/emu/thread_context.hpp>
#endif

namespace gpm {

enum class thread_scope { thread, block, device, system };

// The scope of kernels' atomics on pool data that only GPU threads use while a kernel runs (the
// host reads, recovers or clears it between kernels): gpmkit's logs, GPHash, the benchmarks'
// tables. Device-scope accesses to host-mapped pool lines are served by the GPU's L2, whereas
// each system-scope access crosses PCIe to the host, where accesses to a hot word queue: on an
// H100, GPHash searched 7 M keys/s with system-scope slot loads (docs/benchmarks.md). Data that
// host threads or other GPUs change while a kernel runs needs thread_scope::system.
inline constexpr thread_scope pool_scope = thread_scope::device;

#if GPM_BACKEND_CUDA
namespace stdx = cuda::std;
namespace detail {
template <thread_scope S>
inline constexpr cuda::thread_scope cuda_scope =
    S == thread_scope::thread   ? cuda::thread_scope_thread
    : S == thread_scope::block  ? cuda::thread_scope_block
    : S == thread_scope::device ? cuda::thread_scope_device
                                : cuda::thread_scope_system;
}  // namespace detail
#else
namespace stdx = std;
#endif

using memory_order = stdx::memory_order;
inline constexpr memory_order memory_order_relaxed = stdx::memory_order_relaxed;
inline constexpr memory_order memory_order_acquire = stdx::memory_order_acquire;
inline constexpr memory_order memory_order_release = stdx::memory_order_release;
inline constexpr memory_order memory_order_acq_rel = stdx::memory_order_acq_rel;
inline constexpr memory_order memory_order_seq_cst = stdx::memory_order_seq_cst;

template <class T, thread_scope Scope = thread_scope::device>
class atomic_ref {
#if GPM_BACKEND_CUDA
  using impl = cuda::atomic_ref<T, detail::cuda_scope<Scope>>;
  static GPM_HOST_DEVICE void point(bool = false) {}
#else
  using impl = std::atomic_ref<T>;
  static void point(bool spinning = false) { emu::detail::atomic_point(spinning); }
#endif

 public:
  static constexpr thread_scope scope = Scope;

  GPM_HOST_DEVICE explicit atomic_ref(T& object) : ref_(object) {}

  GPM_HOST_DEVICE T load(memory_order order = memory_order_seq_cst) const {
    T v = ref_.load(order);
    point();
    return v;
  }
  GPM_HOST_DEVICE void store(T desired, memory_order order = memory_order_seq_cst) const {
    ref_.store(desired, order);
    point();
  }
  GPM_HOST_DEVICE T exchange(T desired, memory_order order = memory_order_seq_cst) const {
    T v = ref_.exchange(desired, order);
    point();
    return v;
  }
  GPM_HOST_DEVICE bool compare_exchange_strong(T& expected, T desired,
                                               memory_order order = memory_order_seq_cst) const {
    bool ok = ref_.compare_exchange_strong(expected, desired, order);
    point(!ok);
    return ok;
  }
  GPM_HOST_DEVICE bool compare_exchange_weak(T& expected, T desired,
                                             memory_order order = memory_order_seq_cst) const {
    bool ok = ref_.compare_exchange_weak(expected, desired, order);
    point(!ok);
    return ok;
  }
  GPM_HOST_DEVICE T fetch_add(T v, memory_order order = memory_order_seq_cst) const {
    T old = ref_.fetch_add(v, order);
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_sub(T v, memory_order order = memory_order_seq_cst) const {
    T old = ref_.fetch_sub(v, order);
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_and(T v, memory_order order = memory_order_seq_cst) const {
    T old = ref_.fetch_and(v, order);
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_or(T v, memory_order order = memory_order_seq_cst) const {
    T old = ref_.fetch_or(v, order);
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_xor(T v, memory_order order = memory_order_seq_cst) const {
    T old = ref_.fetch_xor(v, order);
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_min(T v, memory_order order = memory_order_seq_cst) const {
#if GPM_BACKEND_CUDA
    T old = ref_.fetch_min(v, order);
#else
    T old = ref_.load(memory_order_relaxed);
    while (v < old && !ref_.compare_exchange_weak(old, v, order)) {
    }
#endif
    point();
    return old;
  }
  GPM_HOST_DEVICE T fetch_max(T v, memory_order order = memory_order_seq_cst) const {
#if GPM_BACKEND_CUDA
    T old = ref_.fetch_max(v, order);
#else
    T old = ref_.load(memory_order_relaxed);
    while (v > old && !ref_.compare_exchange_weak(old, v, order)) {
    }
#endif
    point();
    return old;
  }

 private:
  impl ref_;
};

// A fence of the given scope: orders this thread's memory operations as seen by threads of that
// scope (system scope: also by the host and any device, i.e. __threadfence_system()).
template <thread_scope Scope>
GPM_HOST_DEVICE inline void atomic_thread_fence(memory_order order = memory_order_seq_cst) {
#if GPM_BACKEND_CUDA
  cuda::atomic_thread_fence(order, detail::cuda_scope<Scope>);
#else
  std::atomic_thread_fence(order);
  emu::detail::atomic_point();
#endif
}

// Loads a word that only host code changes, and never while a kernel reads it (a log's
// generation, a table's geometry): in GPU code a plain load that the GPU's caches serve (an
// acquire load at system scope would send every reader across PCIe to the host, where they queue);
// elsewhere an acquire load, because on the host backend kernels run on host threads and a plain
// load of a word another thread wrote would be a data race.
template <class T>
GPM_HOST_DEVICE inline T load_host_written(const T& word) {
#if GPM_IN_GPU_CODE
  return word;
#else
  return atomic_ref<T, thread_scope::system>(const_cast<T&>(word)).load(memory_order_acquire);
#endif
}

// Loads and stores a T from bytes that hold objects of other types (pool data copied by logs):
// in GPU code one aligned access of sizeof(T) bytes (the caller guarantees the alignment), which
// nvcc would otherwise split into byte accesses; elsewhere memcpy, which keeps the host compiler's
// type-based alias analysis honest.
template <class T>
GPM_HOST_DEVICE inline T load_bytes_as(const void* p) {
#if GPM_IN_GPU_CODE
  return *static_cast<const T*>(p);
#else
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
template <class T>
GPM_HOST_DEVICE inline void store_bytes_as(void* p, T v) {
#if GPM_IN_GPU_CODE
  *static_cast<T*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

}  // namespace gpm
