// Injected crash points for crash tests. Library and test code mark the steps of a persistent
// protocol with gpm::crash_point("name"); a process started with
//   GPMKIT_CRASH_POINT=name      (or name:n for the n-th time it is reached)
// kills itself with SIGKILL there, exactly like an external kill at that instant. Unarmed, a
// crash point costs one relaxed load. Host code only.
#pragma once

namespace gpm {

void crash_point(const char* name);

// The crash point armed in this process ("" if none), for diagnostics.
const char* armed_crash_point();

}  // namespace gpm
