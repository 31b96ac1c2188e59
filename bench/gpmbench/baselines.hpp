// How the GPM paper's baselines (ASPLOS'22 §5.1) make GPU results durable without GPM. Every
// workload uses these, so that a mode name means the same thing in every workload:
//
//   gpm-ndp  the kernel stores into the mapped pool without persisting; after the kernel, CPU
//            threads write the stored ranges' cache lines back (what the CPU must do on a PM
//            platform whose PCIe writes land in its caches): ndp_persister
//   cap-mm   the kernel computes in GPU memory; the result is copied to pinned host memory
//            (cudaMemcpy), then CPU threads copy it into the mapped pool and write it back: cap_mm
//   cap-fs   the same copy, then write() into a file in the pool's directory and fsync(): cap_fs
//
// On this platform the persistence domain is host memory (platform.md), so the write-back of
// gpm-ndp and cap-mm is what those baselines cost on PM, not what host memory needs; docs/bench.md
// says so. Each counts the bytes it made durable, for write amplification (the paper's Table 4).
// cpu_team is the CPU's parallelism for these and for the CPU-only implementations.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gpm/platform/runtime.hpp>

#include "resources.hpp"

namespace gpmbench {

// A fixed team of CPU threads running one parallel loop at a time (fork-join); the calling
// thread takes a share too. Threads default to the machine's hardware threads.
class cpu_team {
 public:
  explicit cpu_team(unsigned threads = std::thread::hardware_concurrency());
  ~cpu_team();
  cpu_team(const cpu_team&) = delete;
  cpu_team& operator=(const cpu_team&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls body(begin, end) on disjoint pieces covering [0, n), in parallel, and returns when all
  // are done. An exception thrown by a piece is rethrown here (the first one).
  void parallel_for(std::uint64_t n,
                    const std::function<void(std::uint64_t begin, std::uint64_t end)>& body);

 private:
  void work(unsigned member);
  void run_piece(unsigned member);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(std::uint64_t, std::uint64_t)>* body_ = nullptr;
  std::uint64_t n_ = 0;
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

// gpm-ndp: CPU threads write back what a kernel stored into the pool without persisting.
class ndp_persister {
 public:
  explicit ndp_persister(cpu_team& team) : team_(team) {}
  // The kernel that stored [host_ptr, +bytes) must have completed.
  void persist(const void* host_ptr, std::uint64_t bytes);
  std::uint64_t bytes_persisted() const { return bytes_; }

 private:
  cpu_team& team_;
  std::uint64_t bytes_ = 0;
};

// cap-mm: GPU memory -> pinned staging buffer -> mapped pool, written back by CPU threads. Ranges
// larger than the staging buffer go through it in pieces.
class cap_mm {
 public:
  cap_mm(cpu_team& team, std::uint64_t staging_bytes);
  // Copies [device_src, +bytes) into the pool at host_dst and makes it durable; `s` orders the
  // copy after the kernels that produced the data. Returns when the range is durable.
  void persist(void* host_dst, const void* device_src, std::uint64_t bytes, cudaStream_t s);
  std::uint64_t bytes_persisted() const { return bytes_; }

 private:
  cpu_team& team_;
  pinned_buffer staging_;
  std::uint64_t bytes_ = 0;
};

// cap-fs: GPU memory -> pinned staging buffer -> write() into a file, made durable by sync().
class cap_fs {
 public:
  // Creates (or truncates) the file at `path`.
  cap_fs(const std::string& path, std::uint64_t staging_bytes);
  ~cap_fs();
  cap_fs(const cap_fs&) = delete;
  cap_fs& operator=(const cap_fs&) = delete;

  // pwrite()s [device_src, +bytes) at `file_offset`; durable after the next sync().
  void write(std::uint64_t file_offset, const void* device_src, std::uint64_t bytes,
             cudaStream_t s);
  void sync();  // fsync()
  std::uint64_t bytes_persisted() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  pinned_buffer staging_;
  std::uint64_t bytes_ = 0;
};

}  // namespace gpmbench
