// Host file I/O of the gpmbench `ooc` workloads (see ooc_io.hpp).
#include "ooc_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace gpmbench::ooc {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

bool aligned(std::uint64_t offset, std::uint64_t bytes, const void* p) {
  return offset % kDirectAlign == 0 && bytes % kDirectAlign == 0 &&
         reinterpret_cast<std::uintptr_t>(p) % kDirectAlign == 0;
}

}  // namespace

disk_file::disk_file(const std::string& path, bool create, std::uint64_t bytes) : path_(path) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  buffered_ = ::open(path.c_str(), flags, 0644);
  if (buffered_ < 0) fail("cannot open", path);
  if (create && ::ftruncate(buffered_, static_cast<off_t>(bytes)) != 0) {
    ::close(buffered_);
    fail("cannot size", path);
  }
  direct_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);  // -1 on tmpfs: buffered only
}

disk_file::~disk_file() {
  if (direct_ >= 0) ::close(direct_);
  ::close(buffered_);
}

void disk_file::read(std::uint64_t offset, std::uint64_t bytes, void* to) const {
  const int fd = direct_ >= 0 && aligned(offset, bytes, to) ? direct_ : buffered_;
  auto* p = static_cast<char*>(to);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read", path_);
    if (n == 0) {
      errno = EIO;
      fail("unexpected end of", path_);
    }
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

void disk_file::write(std::uint64_t offset, std::uint64_t bytes, const void* from) const {
  const int fd = direct_ >= 0 && aligned(offset, bytes, from) ? direct_ : buffered_;
  const auto* p = static_cast<const char*>(from);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", path_);
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

void disk_file::sync() const {
  if (::fdatasync(buffered_) != 0) fail("cannot fdatasync", path_);
}

bool drop_page_cache() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  f.flush();
  return static_cast<bool>(f);
}

disk_bandwidth measure_disk(const std::string& dir, std::uint64_t bytes) {
  constexpr std::uint64_t kPiece = 8ull << 20;
  const std::string path = dir + "/disk-sequential.bin";
  void* raw = nullptr;
  const std::uint64_t piece = bytes < kPiece ? bytes : kPiece;
  if (posix_memalign(&raw, kDirectAlign, piece) != 0) throw std::bad_alloc();
  const std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
  std::memset(raw, 0x5a, piece);
  for (std::uint64_t i = 0; i < piece; i += 8) {  // incompressible
    const std::uint64_t v = (i + 1) * 0x9e3779b97f4a7c15ull;
    std::memcpy(static_cast<char*>(raw) + i, &v, sizeof v);
  }
  disk_bandwidth bw;
  using clock = std::chrono::steady_clock;
  {
    const disk_file f(path, true, 0);
    bw.direct = f.direct();
    const auto t0 = clock::now();
    for (std::uint64_t at = 0; at < bytes; at += piece) f.write(at, piece, raw);
    f.sync();
    bw.write_GBps = static_cast<double>(bytes) / 1e9 /
                    std::chrono::duration<double>(clock::now() - t0).count();
  }
  drop_page_cache();
  {
    const disk_file f(path, false);
    const auto t0 = clock::now();
    for (std::uint64_t at = 0; at < bytes; at += piece) f.read(at, piece, raw);
    bw.read_GBps = static_cast<double>(bytes) / 1e9 /
                   std::chrono::duration<double>(clock::now() - t0).count();
  }
  // The same in one request each way.
  void* whole_raw = nullptr;
  if (posix_memalign(&whole_raw, kDirectAlign, bytes) != 0) throw std::bad_alloc();
  const std::unique_ptr<void, decltype(&std::free)> whole(whole_raw, &std::free);
  for (std::uint64_t at = 0; at < bytes; at += piece) {
    std::memcpy(static_cast<char*>(whole_raw) + at, raw, piece);
  }
  const auto rate = [&](auto&& io) {
    const auto t0 = clock::now();
    io();
    return static_cast<double>(bytes) / 1e9 /
           std::chrono::duration<double>(clock::now() - t0).count();
  };
  ::unlink(path.c_str());
  {
    const disk_file f(path, true, 0);
    bw.write_whole_GBps = rate([&] {
      f.write(0, bytes, whole_raw);
      f.sync();
    });
  }
  drop_page_cache();
  {
    const disk_file f(path, false);
    bw.read_whole_GBps = rate([&] { f.read(0, bytes, whole_raw); });
  }
  ::unlink(path.c_str());
  return bw;
}

}  // namespace gpmbench::ooc
