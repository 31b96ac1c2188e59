// What the log module's tests share: a scratch pool, and a device buffer of per-thread results.
#pragma once

#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace gpm::test {

inline pool_options quiet_options(const std::string& pm_dir, const std::string& snapshot_dir) {
  pool_options o;
  o.pm_dir = pm_dir;
  o.snapshot_dir = snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

// A fresh pool in private directories, removed with the fixture.
class scratch_pool {
 public:
  explicit scratch_pool(const std::string& tag, std::uint64_t bytes = 16 << 20)
      : dirs_(tag),
        options_(quiet_options(dirs_.pm_dir(), dirs_.snapshot_dir())),
        pool_(pool::create("log.pool", bytes, "log-test", options_)) {}

  pool& get() { return pool_; }
  // Closes and reopens the pool, as a restarted program would.
  pool& reopen() {
    pool_.close();
    pool_ = pool::open("log.pool", "log-test", options_);
    return pool_;
  }

 private:
  scratch_dirs dirs_;
  pool_options options_;
  pool pool_;
};

// Per-thread statuses written by kernels (as integers), read back on the host.
inline std::vector<std::uint32_t> statuses(const device_buffer<std::uint32_t>& d) {
  sync_ok();
  return to_host(d);
}

}  // namespace gpm::test
