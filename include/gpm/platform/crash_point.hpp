// Injected crash points for crash tests. Library and test code mark the steps of a persistent
// protocol with gpm::crash_point("name"); a process started with
//   GPMKIT_CRASH_POINT=name      (or name:n for the n-th time it is reached)
// kills itself with SIGKILL there, exactly like an external kill at that instant. Unarmed, a
// crash point costs one relaxed load. crash_point is host code only; kernel_crash_point marks a
// step of a protocol that kernels run.
#pragma once

#include <gpm/config.hpp>
#include <gpm/platform/macros.hpp>

namespace gpm {

void crash_point(const char* name);

// The crash point armed in this process ("" if none), for diagnostics.
const char* armed_crash_point();

// A crash point inside code that kernels run: on the host backend, whose kernels run in the
// process, it is crash_point(name); in GPU code it does nothing (there, SIGKILL at random moments
// reaches the same states).
GPM_HOST_DEVICE inline void kernel_crash_point(const char* name) {
#if GPM_BACKEND_HOST && !GPM_IN_GPU_CODE
  crash_point(name);
#else
  (void)name;
#endif
}

}  // namespace gpm
