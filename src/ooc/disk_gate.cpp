// The per-disk admission of background reads and writes (see disk_gate.hpp).
#include "disk_gate.hpp"

namespace gpm::detail::ooc {

bool disk_gate::enter(std::uint64_t disk, std::chrono::microseconds patience) {
  std::unique_lock lock(m_);
  std::uint32_t& taken = busy_[disk];
  if (!freed_.wait_for(lock, patience, [&] { return taken < kBackgroundPerDisk; })) {
    return false;
  }
  ++taken;
  return true;
}

void disk_gate::leave(std::uint64_t disk) {
  {
    std::lock_guard lock(m_);
    --busy_[disk];
  }
  freed_.notify_all();
}

disk_gate& disk_gate::background() {
  // Never destroyed: I/O threads of mappings that outlive static destruction may still use it.
  static disk_gate* const gate = new disk_gate;
  return *gate;
}

}  // namespace gpm::detail::ooc
