// The paper's baseline persistence paths and the CPU team (see baselines.hpp).
#include "baselines.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <gpm/platform/persist.hpp>

namespace gpmbench {

cpu_team::cpu_team(unsigned threads) {
  for (unsigned m = 1; m < std::max(1u, threads); ++m) workers_.emplace_back([this, m] { work(m); });
}

cpu_team::~cpu_team() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void cpu_team::run_piece(unsigned member) {
  const std::uint64_t per = (n_ + size() - 1) / size();
  const std::uint64_t begin = std::min(n_, per * member);
  const std::uint64_t end = std::min(n_, begin + per);
  if (begin >= end) return;
  try {
    (*body_)(begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void cpu_team::work(unsigned member) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_piece(member);
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
  }
}

void cpu_team::parallel_for(
    std::uint64_t n, const std::function<void(std::uint64_t begin, std::uint64_t end)>& body) {
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    n_ = n;
    pending_ = static_cast<unsigned>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  run_piece(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  body_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

namespace {

constexpr std::uint64_t kLine = 64;

// Splits [p, +bytes) into cache-line-aligned pieces, one per team member, and writes them back.
void write_back_parallel(cpu_team& team, const void* p, std::uint64_t bytes) {
  const auto* base = static_cast<const unsigned char*>(p);
  const std::uint64_t lines = (bytes + kLine - 1) / kLine;
  team.parallel_for(lines, [&](std::uint64_t b, std::uint64_t e) {
    const std::uint64_t from = b * kLine;
    gpm::write_back(base + from, std::min(bytes, e * kLine) - from);
  });
}

}  // namespace

void ndp_persister::persist(const void* host_ptr, std::uint64_t bytes) {
  write_back_parallel(team_, host_ptr, bytes);
  bytes_ += bytes;
}

cap_mm::cap_mm(cpu_team& team, std::uint64_t staging_bytes)
    : team_(team), staging_(std::max<std::uint64_t>(staging_bytes, kLine)) {}

void cap_mm::persist(void* host_dst, const void* device_src, std::uint64_t bytes,
                     cudaStream_t s) {
  auto* dst = static_cast<unsigned char*>(host_dst);
  const auto* src = static_cast<const unsigned char*>(device_src);
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t piece = std::min(staging_.bytes(), bytes - done);
    gpm::check_cuda(cudaMemcpyAsync(staging_.data(), src + done, piece, cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (cap-mm)");
    gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (cap-mm)");
    const unsigned char* from = staging_.data();
    unsigned char* to = dst + done;
    const std::uint64_t lines = (piece + kLine - 1) / kLine;
    team_.parallel_for(lines, [&](std::uint64_t b, std::uint64_t e) {
      const std::uint64_t lo = b * kLine, hi = std::min(piece, e * kLine);
      std::memcpy(to + lo, from + lo, hi - lo);
      gpm::write_back(to + lo, hi - lo);
    });
    done += piece;
  }
  bytes_ += bytes;
}

cap_fs::cap_fs(const std::string& path, std::uint64_t staging_bytes)
    : path_(path), staging_(std::max<std::uint64_t>(staging_bytes, kLine)) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error("cap-fs: cannot create " + path + ": " + std::strerror(errno));
}

cap_fs::~cap_fs() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

void cap_fs::write(std::uint64_t file_offset, const void* device_src, std::uint64_t bytes,
                   cudaStream_t s) {
  const auto* src = static_cast<const unsigned char*>(device_src);
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t piece = std::min(staging_.bytes(), bytes - done);
    gpm::check_cuda(cudaMemcpyAsync(staging_.data(), src + done, piece, cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (cap-fs)");
    gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (cap-fs)");
    for (std::uint64_t w = 0; w < piece;) {
      const ssize_t n = ::pwrite(fd_, staging_.data() + w, piece - w,
                                 static_cast<off_t>(file_offset + done + w));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("cap-fs: cannot write " + path_ + ": " + std::strerror(errno));
      w += static_cast<std::uint64_t>(n);
    }
    done += piece;
  }
  bytes_ += bytes;
}

void cap_fs::sync() {
  if (::fsync(fd_) != 0) {
    throw std::runtime_error("cap-fs: cannot fsync " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace gpmbench
