// Host file I/O of the gpmbench `ooc` workloads' baselines and setup: a file opened twice (with
// O_DIRECT where the file system takes it, and buffered), whole-range reads and writes that use
// O_DIRECT when offset, length and buffer are 4 KiB-aligned, dropping the page cache, and the
// disk's sequential bandwidth measured in the run. Errors throw std::runtime_error naming the file.
#pragma once

#include <cstdint>
#include <string>

namespace gpmbench::ooc {

inline constexpr std::uint64_t kDirectAlign = 4096;

class disk_file {
 public:
  // create: make it (or truncate it) and size it to `bytes` (a sparse file: reads give zeros).
  disk_file(const std::string& path, bool create, std::uint64_t bytes = 0);
  ~disk_file();
  disk_file(const disk_file&) = delete;
  disk_file& operator=(const disk_file&) = delete;

  // Whole ranges; O_DIRECT when offset, bytes and the buffer are aligned, buffered otherwise.
  void read(std::uint64_t offset, std::uint64_t bytes, void* to) const;
  void write(std::uint64_t offset, std::uint64_t bytes, const void* from) const;
  void sync() const;  // fdatasync
  bool direct() const { return direct_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int buffered_ = -1;
  int direct_ = -1;
};

// Writes back dirty pages and drops the page cache (root only); false where not permitted.
bool drop_page_cache();

struct disk_bandwidth {
  double read_GBps = 0;  // in 8 MiB requests, one at a time
  double write_GBps = 0;
  double read_whole_GBps = 0;  // in one request of all the bytes
  double write_whole_GBps = 0;
  bool direct = false;  // measured with O_DIRECT
  // The faster of the two ways: the rates the workloads' disk traffic is compared against.
  double best_read_GBps() const {
    return read_GBps > read_whole_GBps ? read_GBps : read_whole_GBps;
  }
  double best_write_GBps() const {
    return write_GBps > write_whole_GBps ? write_GBps : write_whole_GBps;
  }
};

// Writes `bytes` to a new file in `dir` sequentially in 8 MiB pieces and fdatasyncs it, drops
// the page cache (when permitted), reads it back sequentially; then the same with one request
// for all the bytes each way (a virtual disk may serve one large request, split into many in
// flight, faster than pieces one at a time: the chunked pipeline reads whole windows so); and
// removes the file.
disk_bandwidth measure_disk(const std::string& dir, std::uint64_t bytes);

}  // namespace gpmbench::ooc
