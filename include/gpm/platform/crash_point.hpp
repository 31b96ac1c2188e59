// Injected crash points for crash tests. Library and test code mark the steps of a persistent
// protocol with gpm::crash_point("name"); a process started with
//   GPMKIT_CRASH_POINT=name      (or name:n for the n-th time it is reached)
// kills itself with SIGKILL there, exactly like an external kill at that instant. A crash-image
// checker armed in the process (crash_image.hpp) explores crash images there first. Unarmed, a
// crash point costs two relaxed loads. crash_point is host code only; kernel_crash_point marks a
// step of a protocol that kernels run. On the host backend a kernel's crash point kills the process
// at once, like crash_point. A GPU thread cannot kill its process: there the thread that reaches
// the armed point makes its stores reach the host, raises a flag in mapped host memory and stops
// forever, and a host thread that watches the flag sends the SIGKILL. Other GPU threads run on for
// those microseconds, as they would between a kill and the GPU's stop; the stopped thread's step
// never completes. Kernels reach the armed point through a kernel_crash_ref that the host passes
// them (kernel_crash_points()); without one, a kernel's crash point does nothing on a GPU.
#pragma once

#include <cstdint>

#include <gpm/config.hpp>
#include <gpm/platform/macros.hpp>

namespace gpm {

void crash_point(const char* name);

// The crash point armed in this process ("" if none), for diagnostics.
const char* armed_crash_point();

// A crash point inside code that kernels run: on the host backend, whose kernels run in the
// process, it is crash_point(name); in GPU code it does nothing (use the overload below, or rely
// on SIGKILL at random moments there).
GPM_HOST_DEVICE inline void kernel_crash_point(const char* name) {
#if GPM_BACKEND_HOST && !GPM_IN_GPU_CODE
  crash_point(name);
#else
  (void)name;
#endif
}

// The armed crash point as GPU threads see it: the hits left before the crash and the flag the
// watching host thread polls, in page-locked host memory mapped into the GPU.
struct kernel_crash_record {
  unsigned long long hits_left;
  unsigned long long hit;
};

// What a kernel needs to reach the armed crash point on a GPU; trivially copyable, passed by
// value inside a module's device view. Empty (record null) when no point is armed, and always on
// the host backend.
struct kernel_crash_ref {
  std::uint64_t name_hash = 0;
  kernel_crash_record* record = nullptr;  // device address
};

// The names of crash points as kernels compare them (FNV-1a).
GPM_HOST_DEVICE inline std::uint64_t crash_point_hash(const char* name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (; *name != '\0'; ++name) h = (h ^ static_cast<unsigned char>(*name)) * 0x100000001b3ull;
  return h;
}

// Host code: the armed crash point for kernels. On the CUDA backend, in a process started with
// GPMKIT_CRASH_POINT, the first call maps the record into the GPU and starts the watching thread
// (throws errc::cuda if the memory cannot be mapped); otherwise it returns an empty ref.
kernel_crash_ref kernel_crash_points();

#if GPM_IN_GPU_CODE
namespace detail {
// The GPU side of an armed crash point (see the top of this file). Device scope suffices for the
// count: only this GPU's threads count hits. Hits after the crash wrap the count past zero.
__device__ inline void stop_at_crash_point(const kernel_crash_ref& armed, const char* name) {
  if (crash_point_hash(name) != armed.name_hash) return;
  if (atomicAdd(&armed.record->hits_left, ~0ull) != 1) return;
  __threadfence_system();  // what this thread stored before the point is on the host first
  *static_cast<volatile unsigned long long*>(&armed.record->hit) = 1;
  __threadfence_system();
  for (;;) __nanosleep(1u << 20);
}
}  // namespace detail
#endif

// A crash point inside code that kernels run, reachable on both backends: on the host backend it
// is crash_point(name); on a GPU the thread that reaches the armed point stops there until the
// host kills the process. Unarmed, it costs a test of `armed`.
GPM_HOST_DEVICE inline void kernel_crash_point(const kernel_crash_ref& armed, const char* name) {
#if GPM_IN_GPU_CODE
  if (armed.record != nullptr) detail::stop_at_crash_point(armed, name);
#else
  (void)armed;
  kernel_crash_point(name);
#endif
}

}  // namespace gpm
