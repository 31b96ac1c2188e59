// The process's pool of pinned staging buffers (see staging.hpp).
#include "staging.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include <gpm/platform/error.hpp>

namespace gpm::detail::ooc {

namespace {

// Buffers are pinned in powers of two from 64 KiB, so that loads of similar sizes reuse them.
constexpr std::uint64_t kSmallestBuffer = 64ull << 10;

struct pool {
  std::mutex m;
  std::vector<pinned_buffer<std::byte>> idle;  // largest first
  std::uint64_t pinned = 0;                    // idle and lent

  std::uint64_t idle_bytes() const {  // m held
    std::uint64_t n = 0;
    for (const auto& b : idle) n += b.bytes();
    return n;
  }
};

// Never destroyed: its memory goes with the process. Unpinning it during static destruction could
// run after the runtime (or the emulator's registry of pinned memory) is gone.
pool& the_pool() {
  static pool* const p = new pool;
  return *p;
}

std::uint64_t buffer_size(std::uint64_t bytes) {
  std::uint64_t size = kSmallestBuffer;
  while (size < bytes) size *= 2;
  return size;
}

}  // namespace

staging_buffer::staging_buffer(std::uint64_t bytes, bool exact) {
  pool& p = the_pool();
  {
    std::lock_guard lock(p.m);
    // The smallest idle buffer that is large enough.
    for (auto it = p.idle.rbegin(); it != p.idle.rend(); ++it) {
      if (it->bytes() >= bytes) {
        memory_ = std::move(*it);
        p.idle.erase(std::next(it).base());
        return;
      }
    }
  }
  const std::uint64_t size = exact ? bytes : buffer_size(bytes);
  try {
    memory_ = pinned_buffer<std::byte>::for_io(size);
  } catch (const gpm::error& e) {
    throw_error(errc::out_of_memory,
                "gpm::ooc: cannot pin " + std::to_string(size) +
                    " bytes of host memory for a mapping's transfers: " + e.what());
  }
  std::lock_guard lock(p.m);
  p.pinned += size;
}

staging_buffer::~staging_buffer() {
  pool& p = the_pool();
  std::lock_guard lock(p.m);
  const auto at = std::find_if(p.idle.begin(), p.idle.end(),
                               [&](const auto& b) { return b.bytes() <= memory_.bytes(); });
  p.idle.insert(at, std::move(memory_));
  std::uint64_t idle = p.idle_bytes();
  while (idle > kStagingKeptBytes) {
    idle -= p.idle.back().bytes();
    p.pinned -= p.idle.back().bytes();
    p.idle.pop_back();
  }
}

std::uint64_t staging_buffer::pinned_bytes() {
  pool& p = the_pool();
  std::lock_guard lock(p.m);
  return p.pinned;
}

std::uint64_t staging_buffer::lent_bytes() {
  pool& p = the_pool();
  std::lock_guard lock(p.m);
  return p.pinned - p.idle_bytes();
}

}  // namespace gpm::detail::ooc
