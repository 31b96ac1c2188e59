// `gpmbench crash-demo` (see crash_demo.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <gpm/platform/runtime.hpp>

namespace gpmbench {

// The demonstration; returns the exit status (0: the resumed result is correct).
int crash_demo(const gpm::device_info& dev);
// The child it starts (`gpmbench crash-demo --child DIR LEVEL`).
int crash_demo_child(const std::string& dir, bool emulated, std::uint64_t kill_at);

}  // namespace gpmbench
