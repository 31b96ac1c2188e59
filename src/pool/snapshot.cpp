// Pool snapshots (see snapshot.hpp and docs/format.md, "Snapshots").
#include "snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/format.hpp>
#include <gpm/pool/object_header.hpp>

#include "layout.hpp"
#include "mapping.hpp"
#include "snapshot_format.hpp"

namespace gpm::detail {

namespace {

namespace fmt = format::pool;
using namespace format::snapshot;
constexpr std::uint64_t kPage = fmt::kPageBytes;
constexpr std::uint64_t kEntryStride = sizeof(journal_entry) + kPage;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// Pages read per call while checksumming: large enough to amortise a read, small enough to stay
// in cache until it is checksummed.
constexpr std::uint64_t kPagesPerRead = 256;
// Journal entries a snapshot handles at a time (8 MiB): filled in parallel, then written, and
// read back and applied, with one call each, where one call per page made an incremental
// snapshot of every page of a pool run at a tenth of the disk's speed.
constexpr std::uint64_t kBatchEntries = 2048;

// Runs fn(begin, end) over parts of [0, n), at least `grain` items each, on up to one thread per
// core; rethrows the first failure.
void parallel_ranges(std::uint64_t n, std::uint64_t grain,
                     const std::function<void(std::uint64_t, std::uint64_t)>& fn) {
  const unsigned threads = static_cast<unsigned>(
      std::clamp<std::uint64_t>(n / grain, 1, std::max(1u, std::thread::hardware_concurrency())));
  if (threads == 1) return fn(0, n);
  std::vector<std::exception_ptr> failed(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        fn(t * n / threads, (t + 1) * n / threads);
      } catch (...) {
        failed[t] = std::current_exception();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
}

std::vector<std::uint64_t> parallel_page_checksums(const pool_reader& read, std::uint64_t pages) {
  std::vector<std::uint64_t> out(pages);
  parallel_ranges(pages, 1024, [&](std::uint64_t begin, std::uint64_t end) {
    std::vector<char> buf(kPagesPerRead * kPage);
    for (std::uint64_t p = begin; p < end; p += kPagesPerRead) {
      const std::uint64_t n = std::min(kPagesPerRead, end - p);
      read(p * kPage, buf.data(), n * kPage);
      for (std::uint64_t i = 0; i < n; ++i) out[p + i] = page_checksum(&buf[i * kPage], p + i);
    }
  });
  return out;
}

std::uint64_t table_checksum(const std::vector<std::uint64_t>& table) {
  return checksum64(table.data(), table.size() * sizeof(std::uint64_t));
}

// Opens a file of a snapshot directory with `flags`, or returns -1 with errno set. Anything but a
// regular file under that name (a FIFO, whose open would block, a device, a directory, a
// symbolic link) is refused at once.
int open_snapshot_file(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0 && errno != ELOOP) return -1;
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    throw_error(errc::invalid_argument,
                "snapshot file " + path +
                    " is not a regular file (a link, FIFO, device or directory took its name): "
                    "remove it yourself, then take a new snapshot");
  }
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

class posix_fs final : public snapshot_fs {
 public:
  ~posix_fs() override {
    for (auto& [p, f] : open_) ::close(f.fd);
  }

  std::optional<std::uint64_t> file_size(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::nullopt;
      fail("stat", path);
    }
    return static_cast<std::uint64_t>(st.st_size);
  }

  void read_at(const std::string& path, std::uint64_t offset, void* buf,
               std::uint64_t len) override {
    const int fd = descriptor(path, access::read);
    auto* p = static_cast<char*>(buf);
    while (len > 0) {
      const ssize_t n = ::pread(fd, p, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("read", path);
      if (n == 0) throw_error(errc::corrupt, "snapshot file " + path + " is shorter than expected");
      p += n;
      offset += static_cast<std::uint64_t>(n);
      len -= static_cast<std::uint64_t>(n);
    }
  }

  void write_at(const std::string& path, std::uint64_t offset, const void* buf,
                std::uint64_t len) override {
    const int fd = descriptor(path, access::write);
    const auto* p = static_cast<const char*>(buf);
    while (len > 0) {
      const ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write", path);
      p += n;
      offset += static_cast<std::uint64_t>(n);
      len -= static_cast<std::uint64_t>(n);
    }
  }

  void truncate(const std::string& path, std::uint64_t size) override {
    if (::ftruncate(descriptor(path, access::write), static_cast<off_t>(size)) != 0) {
      fail("truncate", path);
    }
  }

  void sync_file(const std::string& path) override {
    if (::fsync(descriptor(path, access::read)) != 0) fail("fsync", path);
  }

  void rename(const std::string& from, const std::string& to) override {
    forget(from);
    forget(to);
    if (::rename(from.c_str(), to.c_str()) != 0) fail("rename", from);
  }

  void remove(const std::string& path) override {
    forget(path);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("remove", path);
  }

  void make_dir(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec)
      throw_error(errc::io, "snapshot: cannot create directory " + path + ": " + ec.message());
  }

  void sync_dir(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open directory", path);
    const int r = ::fsync(fd);
    ::close(fd);
    if (r != 0) fail("fsync directory", path);
  }

 private:
  [[noreturn]] static void fail(const char* what, const std::string& path) {
    throw_error(errc::io,
                std::string("snapshot: cannot ") + what + " " + path + ": " + std::strerror(errno));
  }

  // Reading opens a file read-only (a restore must work from snapshot files it may not write);
  // writing creates it if missing and reopens a read-only descriptor for writing.
  enum class access { read, write };

  int descriptor(const std::string& path, access a) {
    auto it = open_.find(path);
    if (it != open_.end() && (a == access::read || it->second.writable)) return it->second.fd;
    forget(path);
    const int flags = a == access::write ? O_RDWR | O_CREAT : O_RDONLY;
    const int fd = open_snapshot_file(path, flags);
    if (fd < 0) {
      if (errno == ENOENT) throw_error(errc::not_found, "snapshot file " + path + " is missing");
      fail("open", path);
    }
    open_[path] = open_file{fd, a == access::write};
    return fd;
  }

  void forget(const std::string& path) {
    auto it = open_.find(path);
    if (it != open_.end()) {
      ::close(it->second.fd);
      open_.erase(it);
    }
  }

  struct open_file {
    int fd;
    bool writable;
  };
  std::map<std::string, open_file> open_;
};

}  // namespace

std::unique_ptr<snapshot_fs> make_posix_fs() { return std::make_unique<posix_fs>(); }

snapshot_lock::snapshot_lock(const std::string& dir, bool changes) {
  if (changes) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw_error(errc::io, "snapshot: cannot create directory " + dir + ": " + ec.message());
  }
  const std::string path = dir + "/lock";
  fd_ = open_snapshot_file(path, changes ? O_RDWR | O_CREAT : O_RDONLY);
  if (fd_ < 0) {
    if (!changes && errno == ENOENT) return;
    throw_error(errc::io, "snapshot: cannot open " + path + ": " + std::strerror(errno));
  }
  struct flock fl {};
  fl.l_type = changes ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;
  if (fcntl(fd_, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    ::close(fd_);
    if (err == EAGAIN || err == EACCES) {
      throw_error(errc::busy, "the snapshot in " + dir +
                                  " is being taken, restored or removed by another process (or "
                                  "another gpm::pool in this one): try again when it is done");
    }
    throw_error(errc::io, "snapshot: cannot lock " + path + ": " + std::strerror(err));
  }
}

snapshot_lock::~snapshot_lock() {
  if (fd_ >= 0) ::close(fd_);
}

void remove_snapshot(const std::string& dir) {
  namespace stdfs = std::filesystem;
  std::error_code ec;
  const stdfs::file_status st = stdfs::symlink_status(dir, ec);
  if (!stdfs::exists(st)) return;
  if (!stdfs::is_directory(st)) {
    throw_error(errc::invalid_argument, dir +
                                            " is not a snapshot directory (it is not a directory); "
                                            "nothing was removed");
  }
  // The names take_first, take, write_manifest and snapshot_lock write; nothing else is ours.
  const auto ours = [](const std::string& name) {
    if (name == "manifest" || name == "manifest.tmp" || name == "image" || name == "pages" ||
        name == "lock") {
      return true;
    }
    const std::string_view digits =
        std::string_view(name).substr(std::min<std::size_t>(8, name.size()));
    return name.rfind("journal.", 0) == 0 && !digits.empty() &&
           digits.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const snapshot_lock lock(dir, true);
  std::vector<std::string> files;
  for (const stdfs::directory_entry& e : stdfs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!ours(name) || !e.is_regular_file(ec) || e.is_symlink(ec)) {
      throw_error(errc::invalid_argument, "snapshot directory " + dir + " holds " + name +
                                              ", which no snapshot writes: remove it yourself "
                                              "first; nothing was removed");
    }
    files.push_back(e.path().string());
  }
  if (ec) throw_error(errc::io, "snapshot: cannot list " + dir + ": " + ec.message());
  for (const std::string& f : files) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT) {
      throw_error(errc::io, "snapshot: cannot remove " + f + ": " + std::strerror(errno));
    }
  }
  if (::rmdir(dir.c_str()) != 0) {
    throw_error(errc::io, "snapshot: cannot remove " + dir + ": " + std::strerror(errno));
  }
}

std::uint64_t pool_path_hash(const std::string& absolute_path) {
  return checksum64(absolute_path.data(), absolute_path.size());
}

std::uint64_t page_checksum(const char* page, std::uint64_t page_index) {
  return checksum64(page, kPage, page_index);
}

snapshot_store::snapshot_store(snapshot_fs& fs, std::string dir, std::string pool_path)
    : fs_(fs), dir_(std::move(dir)), pool_path_(std::move(pool_path)) {}

void snapshot_store::require_ours(const snapshot_manifest& m) const {
  if (m.path_hash != pool_path_hash(pool_path_)) {
    throw_error(errc::already_exists,
                "snapshot directory " + dir_ +
                    " holds the snapshot of a pool at another path (uuid " +
                    format::uuid_string(m.uuid) + "), not of " + pool_path_ +
                    " (was the directory copied or renamed?): it is not used for this pool");
  }
}

std::string snapshot_store::path(const std::string& name) const { return dir_ + "/" + name; }

std::optional<snapshot_manifest> snapshot_store::manifest() {
  const std::string p = path("manifest");
  const auto size = fs_.file_size(p);
  if (!size) return std::nullopt;
  manifest_record r{};
  fs_.read_at(p, 0, &r, std::min<std::uint64_t>(*size, sizeof r));
  format::validate_header(&r, *size, kManifestKind, "snapshot manifest " + p);
  if (r.page_bytes != kPage || r.pool_bytes % kPage != 0 ||
      (r.state != kStateClean && r.state != kStateJournalPending)) {
    throw_error(errc::corrupt, "snapshot manifest " + p + " is inconsistent");
  }
  snapshot_manifest m;
  std::memcpy(m.uuid, r.common.uuid, sizeof m.uuid);
  m.path_hash = r.path_hash;
  m.pool_bytes = r.pool_bytes;
  m.seq = r.seq;
  m.journal_pending = r.state == kStateJournalPending;
  m.journal_checksum = r.journal_checksum;
  m.table_checksum = r.table_checksum;
  m.taken_ns = r.common.created_ns;
  return m;
}

void snapshot_store::write_manifest(const snapshot_manifest& m) {
  manifest_record r{};
  r.common = format::make_header(kManifestKind, sizeof r);
  std::memcpy(r.common.uuid, m.uuid, sizeof r.common.uuid);
  r.common.created_ns = m.taken_ns;
  r.page_bytes = kPage;
  r.pool_bytes = m.pool_bytes;
  r.seq = m.seq;
  r.state = m.journal_pending ? kStateJournalPending : kStateClean;
  r.journal_checksum = m.journal_checksum;
  r.table_checksum = m.table_checksum;
  r.path_hash = m.path_hash;
  format::seal_header(&r);
  const std::string tmp = path("manifest.tmp");
  fs_.remove(tmp);
  fs_.write_at(tmp, 0, &r, sizeof r);
  fs_.sync_file(tmp);
  fs_.rename(tmp, path("manifest"));
  fs_.sync_dir(dir_);  // the rename is the commit point once this returns
}

std::vector<std::uint64_t> snapshot_store::read_table(const snapshot_manifest& m) {
  std::vector<std::uint64_t> table(m.pool_bytes / kPage);
  fs_.read_at(path("pages"), 0, table.data(), table.size() * sizeof(std::uint64_t));
  return table;
}

snapshot_result snapshot_store::take_first(const pool_reader& read, std::uint64_t pool_bytes,
                                           const std::uint8_t (&uuid)[16]) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t pages = pool_bytes / kPage;
  fs_.make_dir(dir_);
  fs_.sync_dir(std::filesystem::path(dir_).parent_path().string());
  std::vector<std::uint64_t> table = parallel_page_checksums(read, pages);
  // Until the manifest exists there is no snapshot, so the image is written in place.
  const std::string image = path("image");
  const std::string pages_file = path("pages");
  fs_.remove(image);
  fs_.remove(pages_file);
  constexpr std::uint64_t kChunk = 16ull << 20;
  std::vector<char> chunk(std::min(kChunk, pool_bytes));
  for (std::uint64_t off = 0; off < pool_bytes; off += kChunk) {
    const std::uint64_t n = std::min(kChunk, pool_bytes - off);
    read(off, chunk.data(), n);
    fs_.write_at(image, off, chunk.data(), n);
  }
  fs_.write_at(pages_file, 0, table.data(), pages * sizeof(std::uint64_t));
  fs_.sync_file(image);
  fs_.sync_file(pages_file);
  fs_.sync_dir(dir_);
  crash_point("snapshot.first.written");
  snapshot_manifest m;
  std::memcpy(m.uuid, uuid, sizeof m.uuid);
  m.path_hash = pool_path_hash(pool_path_);
  m.pool_bytes = pool_bytes;
  m.seq = 1;
  m.table_checksum = table_checksum(table);
  m.taken_ns = now_ns();
  write_manifest(m);
  table_ = std::move(table);
  table_seq_ = 1;
  snapshot_result r;
  r.seq = 1;
  r.pages_total = pages;
  r.pages_changed = pages;
  r.bytes_written = pool_bytes + pages * sizeof(std::uint64_t) + sizeof(manifest_record);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

snapshot_result snapshot_store::take(const pool_reader& read, std::uint64_t pool_bytes) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<char> head(kPage);
  read(0, head.data(), kPage);
  const fmt::header& h = header_of(head.data());
  std::optional<snapshot_manifest> m = manifest();
  if (!m) return take_first(read, pool_bytes, h.common.uuid);
  require_ours(*m);
  if (std::memcmp(m->uuid, h.common.uuid, sizeof m->uuid) != 0) {
    throw_error(errc::already_exists, "snapshot directory " + dir_ +
                                          " holds a snapshot of another pool (uuid " +
                                          format::uuid_string(m->uuid) +
                                          "); remove it (gpmkit pool rm --snapshot) or choose "
                                          "another snapshot directory");
  }
  if (m->pool_bytes != pool_bytes) {
    throw_error(errc::corrupt, "snapshot in " + dir_ + " is of a " + std::to_string(m->pool_bytes) +
                                   "-byte pool, not " + std::to_string(pool_bytes));
  }
  if (m->journal_pending) {
    apply_journal(*m);
    m = manifest();
  }
  if (table_seq_ != m->seq) {
    table_ = read_table(*m);
    if (table_checksum(table_) != m->table_checksum) {
      throw_error(errc::corrupt, "snapshot page table in " + dir_ + " is corrupt");
    }
    table_seq_ = m->seq;
  }
  const std::uint64_t pages = pool_bytes / kPage;
  std::vector<std::uint64_t> current = parallel_page_checksums(read, pages);
  std::vector<std::uint64_t> changed;
  for (std::uint64_t p = 0; p < pages; ++p) {
    if (current[p] != table_[p]) changed.push_back(p);
  }
  snapshot_result r;
  r.pages_total = pages;
  r.pages_changed = changed.size();
  r.seq = m->seq;
  if (changed.empty()) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

  // 1. The journal: every changed page with its checksum, made durable.
  const std::uint64_t seq = m->seq + 1;
  const std::string journal = path("journal." + std::to_string(seq));
  fs_.remove(journal);
  journal_header jh{};
  jh.common = format::make_header(kJournalKind, sizeof jh + changed.size() * kEntryStride);
  std::memcpy(jh.common.uuid, h.common.uuid, sizeof jh.common.uuid);
  jh.seq = seq;
  jh.entries = changed.size();
  jh.page_bytes = kPage;
  format::seal_header(&jh);
  fs_.write_at(journal, 0, &jh, sizeof jh);
  std::uint64_t jsum = checksum64(&jh, sizeof jh);
  std::vector<std::uint64_t> table = table_;
  // Two batches: one is written (a task) while the next is filled and checksummed.
  std::vector<char> batches[2];
  std::future<void> writing;
  std::uint64_t off = sizeof jh;
  for (std::uint64_t first = 0, b = 0; first < changed.size(); first += kBatchEntries, b ^= 1) {
    const std::uint64_t n = std::min(kBatchEntries, changed.size() - first);
    std::vector<char>& batch = batches[b];
    batch.resize(n * kEntryStride);
    // Each page is copied first and checksummed from the copy, so the journal is
    // self-consistent even if the pool changes underneath.
    parallel_ranges(n, 64, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) {
        char* entry = batch.data() + i * kEntryStride;
        const std::uint64_t p = changed[first + i];
        read(p * kPage, entry + sizeof(journal_entry), kPage);
        const journal_entry e{p, page_checksum(entry + sizeof(journal_entry), p)};
        std::memcpy(entry, &e, sizeof e);
      }
    });
    for (std::uint64_t i = 0; i < n; ++i) {
      const char* entry = batch.data() + i * kEntryStride;
      jsum = checksum64(entry, kEntryStride, jsum);
      journal_entry e{};
      std::memcpy(&e, entry, sizeof e);
      table[e.page] = e.checksum;
    }
    if (writing.valid()) writing.get();  // the other batch is written: its buffer is free
    writing = std::async(std::launch::async, [this, &journal, &batch, off] {
      fs_.write_at(journal, off, batch.data(), batch.size());
    });
    off += n * kEntryStride;
  }
  if (writing.valid()) writing.get();
  fs_.sync_file(journal);
  fs_.sync_dir(dir_);
  crash_point("snapshot.journal.written");

  // 2. Commit: the manifest names the journal. From here the new snapshot is the one restored.
  snapshot_manifest next = *m;
  next.seq = seq;
  next.journal_pending = true;
  next.journal_checksum = jsum;
  next.table_checksum = table_checksum(table);
  next.taken_ns = now_ns();
  write_manifest(next);
  crash_point("snapshot.committed");

  // 3. Apply the journal to the image and page table, then mark the snapshot clean.
  apply_journal(next, &table);
  table_ = std::move(table);
  table_seq_ = seq;
  r.seq = seq;
  // The journal once, then each page and its checksum into the image, and two manifests.
  r.bytes_written =
      off + changed.size() * (kPage + sizeof(std::uint64_t)) + 2 * sizeof(manifest_record);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

void snapshot_store::apply_journal(const snapshot_manifest& m,
                                   const std::vector<std::uint64_t>* table_after) {
  const std::string journal = path("journal." + std::to_string(m.seq));
  const auto size = fs_.file_size(journal);
  if (!size || *size < sizeof(journal_header)) {
    throw_error(errc::corrupt, "snapshot " + std::to_string(m.seq) + " in " + dir_ +
                                   " was committed but its journal is missing or truncated");
  }
  journal_header jh{};
  fs_.read_at(journal, 0, &jh, sizeof jh);
  const std::uint64_t pages = m.pool_bytes / kPage;
  const bool header_ok = !format::check_header(&jh, *size, kJournalKind) && jh.seq == m.seq &&
                         jh.page_bytes == kPage && jh.entries <= pages &&
                         *size == sizeof jh + jh.entries * kEntryStride;
  std::vector<char> batch;
  // Entries [first, first + n) into `batch`.
  const auto read_entries = [&](std::uint64_t first, std::uint64_t n) {
    batch.resize(n * kEntryStride);
    fs_.read_at(journal, sizeof jh + first * kEntryStride, batch.data(), n * kEntryStride);
  };
  std::uint64_t jsum = checksum64(&jh, sizeof jh);
  if (table_after != nullptr) {
    jsum = m.journal_checksum;  // the journal take() wrote, from the bytes it checksummed
  } else if (header_ok) {
    for (std::uint64_t first = 0; first < jh.entries; first += kBatchEntries) {
      const std::uint64_t n = std::min(kBatchEntries, jh.entries - first);
      read_entries(first, n);
      for (std::uint64_t i = 0; i < n; ++i) {
        jsum = checksum64(batch.data() + i * kEntryStride, kEntryStride, jsum);
      }
    }
  }
  if (!header_ok || jsum != m.journal_checksum) {
    throw_error(errc::corrupt, "the committed journal of snapshot " + std::to_string(m.seq) +
                                   " in " + dir_ + " is damaged");
  }
  const std::string image = path("image");
  const std::string pages_file = path("pages");
  // The page table as the journal leaves it (take() passes it; recovery reads and updates it),
  // written back one 4 KiB part at a time where an entry changed it.
  std::vector<std::uint64_t> table = table_after != nullptr ? *table_after : read_table(m);
  constexpr std::uint64_t kTablePart = kPage / sizeof(std::uint64_t);
  std::vector<std::uint64_t> parts;  // table parts to write, ascending
  std::vector<char> run;             // consecutive pages, written with one call
  for (std::uint64_t first = 0; first < jh.entries; first += kBatchEntries) {
    const std::uint64_t n = std::min(kBatchEntries, jh.entries - first);
    read_entries(first, n);
    for (std::uint64_t i = 0; i < n;) {
      journal_entry e{};
      std::memcpy(&e, batch.data() + i * kEntryStride, sizeof e);
      std::uint64_t k = 0;  // the run: pages e.page, e.page + 1, ... of entries i, i + 1, ...
      run.clear();
      for (; i + k < n; ++k) {
        journal_entry next{};
        std::memcpy(&next, batch.data() + (i + k) * kEntryStride, sizeof next);
        if (next.page >= pages) {
          throw_error(errc::corrupt, "the journal of snapshot " + std::to_string(m.seq) + " in " +
                                         dir_ + " names page " + std::to_string(next.page) +
                                         " of a " + std::to_string(pages) + "-page pool");
        }
        if (next.page != e.page + k) break;
        const char* page = batch.data() + (i + k) * kEntryStride + sizeof next;
        run.insert(run.end(), page, page + kPage);
        if (table_after == nullptr) table[next.page] = next.checksum;
        if (parts.empty() || parts.back() != next.page / kTablePart) {
          parts.push_back(next.page / kTablePart);
        }
      }
      fs_.write_at(image, e.page * kPage, run.data(), run.size());
      i += k;
    }
    if (first <= jh.entries / 2 && jh.entries / 2 < first + n) crash_point("snapshot.applying");
  }
  for (const std::uint64_t part : parts) {
    const std::uint64_t begin = part * kTablePart;
    fs_.write_at(pages_file, begin * sizeof(std::uint64_t), table.data() + begin,
                 std::min(kTablePart, pages - begin) * sizeof(std::uint64_t));
  }
  fs_.sync_file(image);
  fs_.sync_file(pages_file);
  crash_point("snapshot.applied");
  snapshot_manifest clean = m;
  clean.journal_pending = false;
  clean.journal_checksum = 0;
  write_manifest(clean);
  fs_.remove(journal);
  fs_.sync_dir(dir_);
}

void snapshot_store::recover() {
  const std::optional<snapshot_manifest> m = manifest();
  if (m && m->journal_pending) apply_journal(*m);
}

snapshot_result snapshot_store::restore_into(char* out) {
  const auto start = std::chrono::steady_clock::now();
  const std::optional<snapshot_manifest> m = manifest();
  if (!m) throw_error(errc::not_found, "no snapshot in " + dir_);
  require_ours(*m);
  const std::uint64_t pages = m->pool_bytes / kPage;
  std::vector<std::uint64_t> table = read_table(*m);
  fs_.read_at(path("image"), 0, out, m->pool_bytes);
  if (m->journal_pending) {
    // Committed but not yet applied: the journal's pages and checksums overlay the image.
    const std::string journal = path("journal." + std::to_string(m->seq));
    journal_header jh{};
    fs_.read_at(journal, 0, &jh, sizeof jh);
    std::vector<char> buf(kEntryStride);
    std::uint64_t jsum = checksum64(&jh, sizeof jh);
    std::vector<journal_entry> entries;
    for (std::uint64_t i = 0; i < jh.entries && i < pages; ++i) {
      fs_.read_at(journal, sizeof jh + i * kEntryStride, buf.data(), kEntryStride);
      jsum = checksum64(buf.data(), kEntryStride, jsum);
      journal_entry e{};
      std::memcpy(&e, buf.data(), sizeof e);
      if (e.page >= pages) break;
      std::memcpy(out + e.page * kPage, buf.data() + sizeof e, kPage);
      table[e.page] = e.checksum;
    }
    if (jsum != m->journal_checksum || jh.seq != m->seq) {
      throw_error(errc::corrupt, "the committed journal of snapshot " + std::to_string(m->seq) +
                                     " in " + dir_ + " is damaged");
    }
  }
  if (table_checksum(table) != m->table_checksum) {
    throw_error(errc::corrupt, "snapshot page table in " + dir_ + " is corrupt");
  }
  // Every page against its checksum, on all cores; the first bad page is the one named.
  std::atomic<std::uint64_t> bad{pages};
  parallel_ranges(pages, 1024, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t p = begin; p < end && p < bad.load(std::memory_order_relaxed); ++p) {
      if (page_checksum(out + p * kPage, p) != table[p]) {
        std::uint64_t seen = bad.load(std::memory_order_relaxed);
        while (p < seen && !bad.compare_exchange_weak(seen, p)) {
        }
        return;
      }
    }
  });
  if (const std::uint64_t p = bad.load(); p != pages) {
    throw_error(errc::corrupt, "snapshot image in " + dir_ + " is corrupt at page " +
                                   std::to_string(p) + " (offset " + std::to_string(p * kPage) +
                                   ")");
  }
  snapshot_result r;
  r.seq = m->seq;
  r.pages_total = pages;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace gpm::detail
