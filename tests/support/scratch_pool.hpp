// A scratch pool for a test: a fresh pool in private directories (crash_harness.hpp's
// scratch_dirs), with pool options that keep its notices quiet; and the crash-image tests' pool
// options and test names.
#pragma once

#include <gpm/pool/pool.hpp>

#include <cstdint>
#include <string>

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

// The pool options of a crash-image test (docs/crash-checking.md): quiet, and an image is judged
// as it is, never replaced from a snapshot; `directory_capacity` 0 keeps the default.
inline pool_options image_options(const scratch_dirs& d, std::uint32_t directory_capacity = 0) {
  pool_options o = quiet_options(d.pm_dir(), d.snapshot_dir());
  o.restore_from_snapshot = false;
  if (directory_capacity != 0) o.directory_capacity = directory_capacity;
  return o;
}

// A persist site as the name of a parameterized test: "pool.root.write" -> "pool_root_write".
inline std::string site_test_name(std::string site) {
  for (char& c : site) c = c == '.' ? '_' : c;
  return site;
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

}  // namespace gpm::test
