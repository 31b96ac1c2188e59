// The file under a gpm::ooc mapping (and under the DRAGON compatibility API): opens and validates
// a byte range of a regular file, locks it against overlapping writers (open-file-description
// locks, so two mappings conflict within one process as across processes), and moves bytes with
// pread/pwrite, using O_DIRECT for aligned transfers where the file system supports it and the
// page cache otherwise. Every failure is a gpm::error naming the file and what to do. Host only.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <gpm/ooc/detail/protocol.hpp>

namespace gpm::detail::ooc {

// Alignment of O_DIRECT transfers (file offset, length, buffer): the largest logical block size
// in use, so it holds on every device.
inline constexpr std::uint64_t kDirectAlign = 4096;

// Throws gpm::error (invalid_argument) naming what `path` is unless `st` is a regular file's.
void require_regular(const struct stat& st, const std::string& path);

// Starts writing bytes [at, at + bytes) of open file `fd` to the disk without waiting
// (write-behind, sync_file_range): a hint that makes nothing durable and reports nothing; the
// fdatasync that follows does both.
void start_writeback(int fd, std::uint64_t at, std::uint64_t bytes);

// Calls f(first_bit, end_bit) for each run of set bits in `mask` (words of 32 bits).
template <class F>
void for_each_run(const std::uint32_t* mask, std::uint32_t words, F&& f) {
  const std::uint32_t bits = words * 32;
  std::uint32_t b = 0;
  while (b < bits) {
    if ((mask[b / 32] >> (b % 32) & 1u) == 0) {
      ++b;
      continue;
    }
    const std::uint32_t start = b;
    while (b < bits && (mask[b / 32] >> (b % 32) & 1u) != 0) ++b;
    f(start, b);
  }
}

// fsyncs the directory that holds `path`, so that a name made or renamed there is durable (best
// effort: some file systems cannot fsync a directory).
void sync_parent_directory(const std::string& path);

class backing_file {
 public:
  // Opens bytes [offset, offset + size) of `path`, for writing or reading only. `create` makes the
  // file if missing and extends it to offset + size if shorter (writing only). Throws
  // invalid_argument (empty range, overflow, special file, file too short), not_found, io, busy.
  backing_file(const std::string& path, std::uint64_t size, std::uint64_t offset, bool writable,
               bool create, bool direct_io);
  // A private, already unlinked file in `dir` for data that must never outlive the process.
  static backing_file temporary(const std::string& dir);
  // The file at `path`, created or emptied, for data that must survive a crash (a crash-consistent
  // mapping's staging file, which a committed epoch's records may name); its name is durable when
  // this returns. Throws io, or invalid_argument if `path` is a link or not a regular file.
  static backing_file named_scratch(const std::string& path);
  ~backing_file();
  backing_file(backing_file&& o) noexcept;
  backing_file& operator=(backing_file&&) = delete;
  backing_file(const backing_file&) = delete;
  backing_file& operator=(const backing_file&) = delete;

  // Reads `bytes` at byte `at` of the range into `buf`, which has room for `capacity` bytes (an
  // O_DIRECT read may fill up to `bytes` rounded up to kDirectAlign). Throws io.
  void read(std::uint64_t at, void* buf, std::size_t bytes, std::size_t capacity) const;
  // Reads `bytes` at byte `at` of the range into n buffers of `line` bytes each, in order (bytes
  // <= n * line; read() is the case of one buffer), with vectored reads: the read-ahead of a run of
  // lines into cache entries that are not contiguous. O_DIRECT where the range, `line` and every
  // buffer are aligned (then up to `bytes` rounded up to kDirectAlign may be filled). Throws io.
  void read_scattered(std::uint64_t at, std::byte* const* dst, std::size_t n, std::size_t line,
                      std::uint64_t bytes) const;
  // Writes `bytes` from `buf` at byte `at` of the range. Throws io (ENOSPC: says the disk is full).
  void write(std::uint64_t at, const void* buf, std::size_t bytes) const;
  // Writes `bytes` at byte `at` of the range from n buffers of `line` bytes each, in order (bytes
  // <= n * line; write() is the case of one buffer), with vectored writes: the write-back of a run
  // of cache entries that are not contiguous in memory. O_DIRECT where the range, `bytes`, `line`
  // and every buffer are aligned. Throws io as write() does.
  void write_gathered(std::uint64_t at, const std::byte* const* src, std::size_t n,
                      std::size_t line, std::uint64_t bytes) const;
  // Writes the bytes of `src` (a line's first `valid` bytes, at byte `at` of the range) that
  // `mask` marks (one bit per kMaskGranule bytes, `mask_words` words; null: all of them) and
  // returns how many that is. A line with more than a few runs goes back as one read-merge-write
  // of the span the runs cover: a system call per run would cost thousands for a sparsely written
  // line; the bytes between the runs are written back as they were read. Throws io.
  std::uint64_t write_masked(std::uint64_t at, const std::byte* src, std::uint64_t valid,
                             const std::uint32_t* mask, std::uint32_t mask_words) const;
  // fdatasyncs the file if anything was written to it (write, resize, punch, or create extending
  // it at open) since the last fdatasync; otherwise the data is durable already and it returns at
  // once. Throws io (then the next call tries again).
  void datasync() const;
  // The fdatasync calls datasync() made.
  std::uint64_t datasyncs() const { return datasyncs_.load(std::memory_order_relaxed); }
  // Starts writing bytes [at, at + bytes) of the range to the disk without waiting (the free
  // start_writeback): for writes a datasync() will follow, so that the disk works while the
  // caller goes on writing and the datasync finds less to do.
  void start_writeback(std::uint64_t at, std::uint64_t bytes) const;
  // Sets the file's length (a temporary file's: its holes read as zeros). Throws io.
  void resize(std::uint64_t bytes) const;
  // Gives back the blocks of bytes [at, at + bytes) of the range, which read as zeros from then
  // on (a temporary file's data no longer needed). Best effort: where the file system cannot punch
  // holes, or refuses, the blocks stay allocated and the bytes as they were; returns whether it
  // punched.
  bool punch(std::uint64_t at, std::uint64_t bytes) const;
  // Bytes of disk space the file holds (its allocated blocks). Throws io.
  std::uint64_t allocated_bytes() const;

  // Bytes at the range's start that may hold data: the whole range, unless `create` extended the
  // file at open, when the part past its old end reads as zeros until something is written there
  // (write() moves the mark). Lets the resident load skip reading what can only be zeros.
  std::uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }
  // The device (st_dev) of the file system that holds the file; 0 if fstat fails.
  std::uint64_t disk() const;
  std::uint64_t size() const { return size_; }  // bytes of the range (0 for a temporary file)
  // Whether transfers of whole aligned lines use O_DIRECT: the file system takes it and the
  // range starts on a kDirectAlign boundary.
  bool direct() const {
    return direct_fd_ >= 0 && offset_ % kDirectAlign == 0 && !direct_refused_.load();
  }

 private:
  backing_file() = default;
  // Whether `bytes` at byte `at` of the range may move with O_DIRECT from or to n buffers of
  // `line` bytes each (every buffer but the last moves whole, so those must be whole aligned
  // blocks): the range, `bytes` and every buffer aligned.
  bool direct_ok(std::uint64_t at, const std::byte* const* bufs, std::size_t n, std::size_t line,
                 std::uint64_t bytes) const;

  std::string path_;
  std::uint64_t offset_ = 0;
  std::uint64_t size_ = 0;
  int fd_ = -1;
  int direct_fd_ = -1;
  // Set when the file system took O_DIRECT at open but refused a transfer: page cache from then.
  mutable std::atomic<bool> direct_refused_{false};
  mutable std::atomic<std::uint64_t> held_{0};
  // Set after every change that reaches the file, cleared just before an fdatasync: a change made
  // while one runs sets it again, so the next datasync() covers it.
  mutable std::atomic<bool> unsynced_{false};
  mutable std::atomic<std::uint64_t> datasyncs_{0};
};

}  // namespace gpm::detail::ooc
