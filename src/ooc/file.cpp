// The file under a mapping (see include/gpm/ooc/detail/file.hpp).
#include <gpm/ooc/detail/file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <gpm/platform/detail/file_path.hpp>
#include <gpm/platform/error.hpp>

namespace gpm::detail::ooc {

namespace {

// Masked writes with more runs of written bytes than this go back by read-merge-write.
constexpr std::size_t kMaxRunWrites = 8;

std::string sys_reason(int err) { return std::strerror(err); }

// The iovecs of `bytes` in n buffers of `line` bytes each, in order (the last may be partial).
std::vector<iovec> line_iovecs(const std::byte* const* bufs, std::size_t n, std::size_t line,
                               std::uint64_t bytes) {
  std::vector<iovec> iov;
  for (std::size_t k = 0; k < n && k * std::uint64_t{line} < bytes; ++k) {
    iov.push_back({const_cast<std::byte*>(bufs[k]),
                   static_cast<std::size_t>(std::min<std::uint64_t>(line, bytes - k * line))});
  }
  return iov;
}

// After a vectored read or write moved `moved` bytes: skips them in iov from iov[next] on.
void advance(std::vector<iovec>& iov, std::size_t& next, std::size_t moved) {
  while (moved > 0) {
    const std::size_t take = std::min(moved, iov[next].iov_len);
    iov[next].iov_base = static_cast<char*>(iov[next].iov_base) + take;
    iov[next].iov_len -= take;
    moved -= take;
    if (iov[next].iov_len == 0) ++next;
  }
}

std::string range_text(std::uint64_t offset, std::uint64_t size) {
  return "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) + ")";
}

// An open-file-description lock on the range: shared for readers, exclusive for writers, so a
// writer's range overlaps no other mapping's, in this process or another.
void lock_range(int fd, std::uint64_t offset, std::uint64_t size, bool writable,
                const std::string& path) {
  struct flock fl {};
  fl.l_type = writable ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(offset);
  fl.l_len = static_cast<off_t>(size);
  if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return;
  const int err = errno;
  if (err == EAGAIN || err == EACCES) {
    throw_error(errc::busy, range_text(offset, size) + " of " + path +
                                (writable ? " overlap a range that is mapped already"
                                          : " overlap a range that is mapped for writing") +
                                " (by this or another process): unmap it first, or map "
                                "disjoint ranges");
  }
  throw_error(errc::io,
              "cannot lock " + range_text(offset, size) + " of " + path + ": " + sys_reason(err));
}

}  // namespace

void require_regular(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) {
    throw_error(errc::invalid_argument, path + " is " + file_type_name(st.st_mode) +
                                            ": gpm::ooc maps byte ranges of regular files");
  }
}

backing_file::backing_file(const std::string& path, std::uint64_t size, std::uint64_t offset,
                           bool writable, bool create, bool direct_io)
    : path_(path), offset_(offset), size_(size) {
  if (path.empty()) throw_error(errc::invalid_argument, "gpm::ooc: the file path is empty");
  if (size == 0) throw_error(errc::invalid_argument, "gpm::ooc: cannot map 0 bytes of " + path);
  constexpr std::uint64_t kMaxOffset = static_cast<std::uint64_t>(LLONG_MAX);
  if (offset > kMaxOffset || size > kMaxOffset - offset) {
    throw_error(errc::invalid_argument, "gpm::ooc: offset " + std::to_string(offset) + " + size " +
                                            std::to_string(size) + " of " + path +
                                            " overflows the largest file offset");
  }
  if (create && !writable) {
    throw_error(errc::invalid_argument,
                "gpm::ooc: create needs a writing mode (read_write or write) for " + path);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT) throw_error(errc::io, "cannot stat " + path + ": " + sys_reason(err));
    if (!create) {
      throw_error(errc::not_found,
                  path + " does not exist: create it first, or map it with create = true");
    }
  } else {
    require_regular(st, path);  // before open: opening a FIFO could block
  }
  // O_NONBLOCK: should a FIFO replace the file between stat and open, open does not block on it
  // (and the fstat below refuses it); it changes nothing for regular files.
  const int flags =
      (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (create ? O_CREAT : 0);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) throw_error(errc::not_found, path + " does not exist");
    if (writable && (err == EACCES || err == EROFS || err == EPERM || err == ETXTBSY)) {
      throw_error(errc::io, path + " cannot be opened for writing (" + sys_reason(err) +
                                "): map it with mode::read, or make it writable");
    }
    throw_error(errc::io, "cannot open " + path + ": " + sys_reason(err));
  }
  try {
    if (::fstat(fd_, &st) != 0)
      throw_error(errc::io, "cannot stat " + path + ": " + sys_reason(errno));
    require_regular(st, path);
    lock_range(fd_, offset, size, writable, path);
    const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
    held_ = file_bytes >= offset + size ? size : file_bytes > offset ? file_bytes - offset : 0;
    if (file_bytes < offset + size) {
      if (create) {
        if (::ftruncate(fd_, static_cast<off_t>(offset + size)) != 0) {
          throw_error(errc::io, "cannot extend " + path + " to " + std::to_string(offset + size) +
                                    " bytes: " + sys_reason(errno));
        }
        unsynced_ = true;  // the new length is durable only after an fdatasync
      } else if (offset >= file_bytes) {
        throw_error(errc::invalid_argument, "offset " + std::to_string(offset) +
                                                " is past the end of " + path + " (" +
                                                std::to_string(file_bytes) + " bytes)");
      } else {
        throw_error(errc::invalid_argument, path + " holds " + std::to_string(file_bytes) +
                                                " bytes, fewer than the " +
                                                std::to_string(offset + size) +
                                                " that offset + size need: map a shorter "
                                                "range, or use create = true to extend it");
      }
    }
    if (direct_io) {
      // EINVAL: the file system does not take O_DIRECT (older tmpfs): the page cache serves.
      direct_fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_DIRECT);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

backing_file backing_file::temporary(const std::string& dir) {
  backing_file f;
  f.path_ = dir + "/(gpm::ooc spill file)";
  f.fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (f.fd_ < 0) {
    // File systems without O_TMPFILE: a named file, unlinked at once.
    std::string name = dir + "/.gpm-ooc-spill-XXXXXX";
    f.fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (f.fd_ < 0) {
      throw_error(errc::io, "cannot create a spill file in " + dir + ": " + sys_reason(errno) +
                                ": name a writable directory in mapping_options::spill_dir");
    }
    ::unlink(name.c_str());
  }
  return f;
}

backing_file backing_file::named_scratch(const std::string& path) {
  backing_file f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(),
                 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600);
  if (f.fd_ < 0 && errno != ELOOP && errno != EISDIR) {
    throw_error(errc::io, "cannot create the staging file " + path + ": " + sys_reason(errno));
  }
  struct stat st {};
  if (f.fd_ < 0 || ::fstat(f.fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw_error(errc::invalid_argument,
                path +
                    " is a link or not a regular file, where gpmkit keeps the lines a "
                    "crash-consistent mapping stages between syncs: move it away");
  }
  sync_parent_directory(path);
  return f;
}

void sync_parent_directory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // file systems that cannot fsync a directory need not
    ::close(dfd);
  }
}

backing_file::~backing_file() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

backing_file::backing_file(backing_file&& o) noexcept
    : path_(std::move(o.path_)),
      offset_(o.offset_),
      size_(o.size_),
      fd_(std::exchange(o.fd_, -1)),
      direct_fd_(std::exchange(o.direct_fd_, -1)),
      direct_refused_(o.direct_refused_.load()),
      held_(o.held_.load()),
      unsynced_(o.unsynced_.load()),
      datasyncs_(o.datasyncs_.load()) {}

std::uint64_t backing_file::disk() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_dev) : 0;
}

bool backing_file::direct_ok(std::uint64_t at, const std::byte* const* bufs, std::size_t n,
                             std::size_t line, std::uint64_t bytes) const {
  if (!direct() || (offset_ + at) % kDirectAlign != 0 || bytes % kDirectAlign != 0 ||
      (n > 1 && line % kDirectAlign != 0)) {
    return false;
  }
  return std::all_of(bufs, bufs + n, [](const std::byte* b) {
    return reinterpret_cast<std::uintptr_t>(b) % kDirectAlign == 0;
  });
}

void backing_file::read(std::uint64_t at, void* buf, std::size_t bytes,
                        std::size_t capacity) const {
  std::byte* const dst = static_cast<std::byte*>(buf);
  read_scattered(at, &dst, 1, capacity, bytes);
}

void backing_file::read_scattered(std::uint64_t at, std::byte* const* dst, std::size_t n,
                                  std::size_t line, std::uint64_t bytes) const {
  const std::uint64_t rounded = (bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  const bool direct = rounded <= std::uint64_t{n} * line && direct_ok(at, dst, n, line, rounded);
  const int fd = direct ? direct_fd_ : fd_;
  std::vector<iovec> iov = line_iovecs(dst, n, line, direct ? rounded : bytes);
  std::size_t next = 0;  // the first iovec not filled yet
  std::uint64_t done = 0;
  while (done < bytes) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - next, IOV_MAX));
    const ssize_t r =
        ::preadv(fd, iov.data() + next, count, static_cast<off_t>(offset_ + at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && direct) {
      direct_refused_ = true;
      return read_scattered(at, dst, n, line, bytes);
    }
    if (r < 0) {
      throw_error(errc::io, "cannot read " + std::to_string(bytes) + " bytes at " +
                                std::to_string(offset_ + at) + " of " + path_ + ": " +
                                sys_reason(errno));
    }
    if (r == 0) {
      throw_error(errc::io, path_ + " ends before byte " + std::to_string(offset_ + at + bytes) +
                                ": it was truncated while mapped");
    }
    done += static_cast<std::uint64_t>(r);
    advance(iov, next, static_cast<std::size_t>(r));
  }
}

void backing_file::write(std::uint64_t at, const void* buf, std::size_t bytes) const {
  const auto* const src = static_cast<const std::byte*>(buf);
  write_gathered(at, &src, 1, bytes, bytes);
}

void backing_file::write_gathered(std::uint64_t at, const std::byte* const* src, std::size_t n,
                                  std::size_t line, std::uint64_t bytes) const {
  const bool direct = direct_ok(at, src, n, line, bytes);
  const int fd = direct ? direct_fd_ : fd_;
  std::vector<iovec> iov = line_iovecs(src, n, line, bytes);
  std::size_t next = 0;  // the first iovec not written yet
  std::uint64_t done = 0;
  while (done < bytes) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - next, IOV_MAX));
    const ssize_t r =
        ::pwritev(fd, iov.data() + next, count, static_cast<off_t>(offset_ + at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && direct && done == 0) {
      direct_refused_ = true;
      return write_gathered(at, src, n, line, bytes);
    }
    if (r <= 0) {
      const int err = r < 0 ? errno : ENOSPC;
      const std::string what = "cannot write " + std::to_string(bytes) + " bytes at " +
                               std::to_string(offset_ + at) + " of " + path_ + ": " +
                               sys_reason(err);
      if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
        throw_error(errc::io, what +
                                  ": the file system is full (or the file size limit is "
                                  "reached); the data stays in memory: make room, then sync "
                                  "again");
      }
      throw_error(errc::io, what);
    }
    done += static_cast<std::uint64_t>(r);
    advance(iov, next, static_cast<std::size_t>(r));
    unsynced_.store(true, std::memory_order_release);
  }
  // What was written is data now (a line written back, an epoch applied): reads must fetch it.
  std::uint64_t h = held_.load();
  while (h < at + bytes && !held_.compare_exchange_weak(h, at + bytes)) {
  }
}

std::uint64_t backing_file::write_masked(std::uint64_t at, const std::byte* src,
                                         std::uint64_t valid, const std::uint32_t* mask,
                                         std::uint32_t mask_words) const {
  if (mask == nullptr) {
    write(at, src, valid);
    return valid;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
  for_each_run(mask, mask_words, [&](std::uint32_t b, std::uint32_t end) {
    const std::uint64_t from = std::uint64_t{b} * kMaskGranule;
    const std::uint64_t to = std::min<std::uint64_t>(std::uint64_t{end} * kMaskGranule, valid);
    if (from < to) runs.emplace_back(from, to);
  });
  if (runs.size() <= kMaxRunWrites) {
    for (const auto& [from, to] : runs) write(at + from, src + from, to - from);
  } else {
    const std::uint64_t from = runs.front().first;
    const std::uint64_t bytes = runs.back().second - from;
    std::vector<std::byte> span(bytes);
    read(at + from, span.data(), bytes, bytes);
    for (const auto& [b, e] : runs) std::memcpy(span.data() + (b - from), src + b, e - b);
    write(at + from, span.data(), bytes);
  }
  std::uint64_t written = 0;
  for (const auto& [from, to] : runs) written += to - from;
  return written;
}

void backing_file::resize(std::uint64_t bytes) const {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    throw_error(errc::io, "cannot size " + path_ + " to " + std::to_string(bytes) +
                              " bytes: " + sys_reason(errno));
  }
  unsynced_.store(true, std::memory_order_release);
}

bool backing_file::punch(std::uint64_t at, std::uint64_t bytes) const {
  if (bytes == 0) return true;
  const bool punched =
      ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset_ + at),
                  static_cast<off_t>(bytes)) == 0;
  if (punched) unsynced_.store(true, std::memory_order_release);
  return punched;
}

std::uint64_t backing_file::allocated_bytes() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw_error(errc::io, "cannot stat " + path_ + ": " + sys_reason(errno));
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

void start_writeback(int fd, std::uint64_t at, std::uint64_t bytes) {
  // Errors are the fdatasync's to report; pages written with O_DIRECT have nothing to write back.
  (void)::sync_file_range(fd, static_cast<off64_t>(at), static_cast<off64_t>(bytes),
                          SYNC_FILE_RANGE_WRITE);
}

void backing_file::start_writeback(std::uint64_t at, std::uint64_t bytes) const {
  ooc::start_writeback(fd_, offset_ + at, bytes);
}

void backing_file::datasync() const {
  // Cleared before the fdatasync: what is written while it runs sets the flag again. Nothing
  // written since the last one: it would flush nothing (a sync after a sync, unmap after sync).
  if (!unsynced_.exchange(false, std::memory_order_acq_rel)) return;
  if (::fdatasync(fd_) != 0) {
    const int err = errno;
    unsynced_.store(true, std::memory_order_release);
    throw_error(errc::io, "fdatasync of " + path_ + " failed: " + sys_reason(err));
  }
  datasyncs_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace gpm::detail::ooc
