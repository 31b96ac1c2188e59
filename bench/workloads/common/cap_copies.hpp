// How the CAP baselines of gpKVS and gpDB keep a structure that lives in GPU memory durable with
// the same all-or-nothing guarantee as the GPM modes: two durable copies and a durable record of
// which is current. After a batch the whole structure is copied into the other copy, which then
// becomes current; a crash during the copy leaves the current copy untouched.
//   cap_mm_copies  the copies are pool objects, filled through cap_mm (CPU copy + write-back)
//   cap_fs_copies  the copies are files filled through cap_fs (write + fsync); the current one is
//                  named by a small file replaced atomically (write, fsync, rename)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpmbench/baselines.hpp"
#include "gpmbench/resources.hpp"
#include "workloads/common/batch_modes.hpp"

namespace gpmbench {

class cap_mm_copies {
 public:
  cap_mm_copies(const mode_context& ctx, const std::string& pool_name, std::uint64_t bytes);
  // Copies [gpu, +bytes) (ordered after the work on `s`) into the inactive copy, then makes it
  // current.
  void save(const void* gpu, cudaStream_t s);
  const unsigned char* current() const;  // host view of the current copy
  std::uint64_t bytes_persisted() const { return cap_.bytes_persisted(); }

 private:
  std::uint64_t bytes_;
  bench_pool pool_;
  std::uint64_t offsets_[2];
  std::uint64_t* selector_;
  cpu_team team_;
  cap_mm cap_;
};

class cap_fs_copies {
 public:
  // The files <dir>/<name>.0, .1 and .current.
  cap_fs_copies(const std::string& dir, const std::string& name, std::uint64_t bytes);
  ~cap_fs_copies();
  cap_fs_copies(const cap_fs_copies&) = delete;
  cap_fs_copies& operator=(const cap_fs_copies&) = delete;
  void save(const void* gpu, cudaStream_t s);
  std::vector<unsigned char> read_current() const;  // what a restart would find
  std::uint64_t bytes_persisted() const;

 private:
  void set_current(std::uint64_t which);
  std::string base_;
  std::uint64_t bytes_;
  std::unique_ptr<cap_fs> files_[2];
  std::uint64_t current_ = 0;
};

}  // namespace gpmbench
