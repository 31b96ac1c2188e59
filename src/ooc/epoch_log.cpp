// The epoch log of a crash-consistent mapping (see epoch_log.hpp), and the public inspection and
// recovery functions of include/gpm/ooc/epoch.hpp.
#include "epoch_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/detail/file_path.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/pool/object_header.hpp>

namespace gpm::ooc {

std::string epoch_log_path(const std::string& path, std::uint64_t offset) {
  gpm::detail::require_no_nul(path, "gpm::ooc: the file path");
  return offset == 0 ? path + ".ooc-log" : path + "@" + std::to_string(offset) + ".ooc-log";
}

}  // namespace gpm::ooc

namespace gpm::detail::ooc {

using namespace gpm::format::ooc;

namespace {

std::string sys_reason(int err) { return std::strerror(err); }

std::uint64_t padded(std::uint64_t n) { return (n + 7) / 8 * 8; }

std::string name_of(const std::string& data_path) {
  std::string n = std::filesystem::path(data_path).filename().string();
  if (n.size() >= kNameBytes) n.resize(kNameBytes - 1);
  return n;
}

void pread_all(int fd, void* buf, std::size_t bytes, std::uint64_t at, const std::string& path,
               std::size_t& got) {
  got = 0;
  while (got < bytes) {
    const ssize_t n =
        ::pread(fd, static_cast<char*>(buf) + got, bytes - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_error(errc::io, "cannot read " + path + ": " + sys_reason(errno));
    if (n == 0) return;
    got += static_cast<std::size_t>(n);
  }
}

void pwrite_all(int fd, const void* buf, std::size_t bytes, std::uint64_t at,
                const std::string& path) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd, static_cast<const char*>(buf) + done, bytes - done,
                               static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      std::string what = "cannot write the epoch log " + path + ": " + sys_reason(err);
      if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
        what +=
            ": the file system is full (or the file size limit is reached); the epoch is not "
            "committed, the file is unchanged and the data stays in memory: make room, then "
            "sync again";
      }
      throw_error(errc::io, what);
    }
    done += static_cast<std::size_t>(n);
  }
}

std::uint64_t root_checksum(const epoch_log::root& r, std::uint64_t seed) {
  return checksum64(&r, offsetof(epoch_log::root, checksum), seed ^ 0x726f6f74ull);
}

std::uint64_t head_checksum(const record_head& h, std::uint64_t seed) {
  return checksum64(&h, offsetof(record_head, checksum), seed);
}

// A record's payload checksum: its payload in the log, then (a staged record) the bytes the
// staging file holds for it.
std::uint64_t payload_checksum(const std::byte* payload, std::uint64_t n, const std::byte* staged,
                               std::uint64_t bytes, std::uint64_t seed) {
  const std::uint64_t c = checksum64(payload, n, seed);
  return staged == nullptr ? c : checksum64(staged, bytes, c);
}

std::uint64_t table_checksum(std::vector<std::byte> table, std::uint64_t seed) {
  std::memset(table.data() + offsetof(stripe_table_head, checksum), 0, sizeof(std::uint64_t));
  return checksum64(table.data(), table.size(), seed ^ 0x7374726970657321ull);
}

// Where the records start after a stripe table of `table_bytes` (none: 0).
std::uint64_t records_start(std::uint64_t table_bytes) {
  return table_bytes == 0
             ? kHeaderPage
             : kHeaderPage + (table_bytes + kHeaderPage - 1) / kHeaderPage * kHeaderPage;
}

// The stripe set as logs record and compare it: one file as given; several by absolute paths.
stripe_set normalized(const stripe_set& s) {
  if (s.paths.size() <= 1) return {s.paths, 0};
  stripe_set n{{}, s.line_bytes};
  for (const std::string& p : s.paths) {
    n.paths.push_back(gpm::detail::absolute_path(p));
  }
  return n;
}

std::string describe(const stripe_set& s) {
  if (s.paths.size() == 1) return "the file " + s.paths[0] + " alone";
  std::string d = std::to_string(s.paths.size()) + " files striped by " +
                  std::to_string(s.line_bytes) + "-byte lines:";
  for (const std::string& p : s.paths) d += " " + p;
  return d;
}

}  // namespace

epoch_log::epoch_log(const std::string& data_path, std::uint64_t offset, const stripe_set* files)
    : path_(gpm::ooc::epoch_log_path(data_path, offset)),
      data_path_(data_path),
      data_name_(name_of(data_path)),
      offset_(offset) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT || files == nullptr) {
      throw_error(errno == ENOENT ? errc::not_found : errc::io,
                  "cannot stat " + path_ + ": " + sys_reason(errno));
    }
    create(normalized(*files));
  }
  open_existing(true);
  if (files != nullptr) {
    const stripe_set want = normalized(*files);
    if (want.paths.size() != stripes_.paths.size() ||
        (want.paths.size() > 1 && !(want == stripes_))) {
      throw_error(errc::layout_mismatch,
                  "epoch log " + path_ + " belongs to " + describe(stripes_) + ", not to " +
                      describe(want) +
                      ": map the range as it was mapped, or recover it first (gpmkit ooc "
                      "recover) and move the log away (nothing was deleted)");
    }
  }
}

epoch_log epoch_log::open_read_only(const std::string& data_path, std::uint64_t offset) {
  epoch_log log;
  log.path_ = gpm::ooc::epoch_log_path(data_path, offset);
  log.data_path_ = data_path;
  log.data_name_ = name_of(data_path);
  log.offset_ = offset;
  log.open_existing(false);
  return log;
}

epoch_log::~epoch_log() {
  if (fd_ >= 0) ::close(fd_);
  if (staging_fd_ >= 0) ::close(staging_fd_);
}

epoch_log::epoch_log(epoch_log&& o) noexcept
    : path_(std::move(o.path_)),
      staging_path_(std::move(o.staging_path_)),
      staging_fd_(std::exchange(o.staging_fd_, -1)),
      staged_refs_(o.staged_refs_),
      staged_appended_(o.staged_appended_),
      data_path_(std::move(o.data_path_)),
      data_name_(std::move(o.data_name_)),
      offset_(o.offset_),
      stripes_(std::move(o.stripes_)),
      records_at_(o.records_at_),
      fd_(std::exchange(o.fd_, -1)),
      created_ns_(o.created_ns_),
      uuid_seed_(o.uuid_seed_),
      root_(o.root_),
      end_(o.end_),
      writeback_from_(o.writeback_from_),
      records_(o.records_),
      chain_(o.chain_),
      bytes_written_(o.bytes_written_),
      bytes_applied_(o.bytes_applied_),
      own_records_(o.own_records_),
      buf_(std::move(o.buf_)) {
  std::memcpy(uuid_, o.uuid_, sizeof uuid_);
}

[[noreturn]] void epoch_log::corrupt(const std::string& what) const {
  throw_error(errc::corrupt, "epoch log " + path_ + " of " + data_path_ + ": " + what +
                                 "; nothing was written or deleted: keep the log and the file "
                                 "for inspection (gpmkit ooc stat), restore both from a backup");
}

std::uint64_t epoch_log::seed(std::uint64_t pos) const {
  return uuid_seed_ ^ mix64(pos + 0x9e3779b97f4a7c15ull);
}

void epoch_log::create(const stripe_set& files) {
  // Written aside and renamed, so that a crash never leaves a log without a valid header.
  const std::string tmp = path_ + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw_error(errc::io, "cannot create the epoch log " + tmp + ": " + sys_reason(errno) +
                              ": the data file's directory must be writable for crash-consistent "
                              "sync");
  }
  try {
    // A striped range's table: its head, then each path's length and bytes, padded to 8.
    std::vector<std::byte> table;
    if (files.paths.size() > 1) {
      table.resize(sizeof(stripe_table_head));
      for (const std::string& p : files.paths) {
        const auto n = static_cast<std::uint32_t>(p.size());
        const std::size_t at = table.size();
        table.resize(at + 4 + n);
        std::memcpy(table.data() + at, &n, 4);
        std::memcpy(table.data() + at + 4, p.data(), n);
      }
      table.resize(padded(table.size()));
    }
    const std::uint64_t records_at = records_start(table.size());
    std::vector<std::byte> page(records_at);
    log_header h{};
    h.common = format::make_header(kKind, kHeaderPage);
    h.common.incompat_features = kStaged | (table.empty() ? 0 : kStriped);
    h.offset = offset_;
    h.name_bytes = static_cast<std::uint32_t>(data_name_.size());
    std::memcpy(h.name, data_name_.data(), data_name_.size());
    format::seal_header(&h);
    std::memcpy(page.data(), &h, sizeof h);
    uuid_seed_ = checksum64(h.common.uuid, sizeof h.common.uuid);
    if (!table.empty()) {
      stripe_table_head t{static_cast<std::uint32_t>(files.paths.size()), 0, files.line_bytes,
                          table.size(), 0};
      std::memcpy(table.data(), &t, sizeof t);
      t.checksum = table_checksum(table, uuid_seed_);
      std::memcpy(table.data(), &t, sizeof t);
      std::memcpy(page.data() + kHeaderPage, table.data(), table.size());
    }
    root r{1, 0, kApplied, 0, 0, records_at, 0, 0};
    r.checksum = root_checksum(r, uuid_seed_);
    std::memcpy(page.data() + kRootAt[r.seq % 2], &r, sizeof r);
    pwrite_all(fd, page.data(), page.size(), 0, tmp);
    if (::fsync(fd) != 0)
      throw_error(errc::io, "fsync of " + tmp + " failed: " + sys_reason(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_error(errc::io, "cannot rename " + tmp + " to " + path_ + ": " + sys_reason(err));
  }
  sync_parent_directory(path_);  // the rename is durable
}

void epoch_log::open_existing(bool writable) {
  staging_path_ = path_ + ".staged";
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    throw_error(errno == ENOENT ? errc::not_found : errc::io,
                "cannot stat the epoch log " + path_ + ": " + sys_reason(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw_error(errc::corrupt, "epoch log " + path_ + " of " + data_path_ +
                                   " is not a regular file: move it away (nothing was deleted)");
  }
  fd_ = ::open(path_.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd_ < 0)
    throw_error(errc::io, "cannot open the epoch log " + path_ + ": " + sys_reason(errno));
  std::vector<std::byte> page(kHeaderPage);
  std::size_t got = 0;
  pread_all(fd_, page.data(), page.size(), 0, path_, got);
  format::validate_header(page.data(), got, kKind, "epoch log " + path_ + " of " + data_path_);
  log_header h;
  std::memcpy(&h, page.data(), sizeof h);
  const std::string name(h.name, std::min<std::size_t>(h.name_bytes, kNameBytes - 1));
  if (name != data_name_ || h.offset != offset_) {
    throw_error(errc::layout_mismatch,
                "epoch log " + path_ + " belongs to bytes from " + std::to_string(h.offset) +
                    " of a file named \"" + name + "\", not to bytes from " +
                    std::to_string(offset_) + " of " + data_path_ +
                    ": it was renamed or copied here; move it back beside its own file (nothing "
                    "was deleted)");
  }
  std::memcpy(uuid_, h.common.uuid, sizeof uuid_);
  created_ns_ = h.common.created_ns;
  uuid_seed_ = checksum64(h.common.uuid, sizeof h.common.uuid);
  staged_refs_ = (h.common.incompat_features & kStaged) != 0;
  if ((h.common.incompat_features & kStriped) != 0) {
    read_stripe_table();
  } else {
    stripes_ = {{data_path_}, 0};
    records_at_ = kHeaderPage;
  }
  bool found = false;
  for (const std::uint64_t at : kRootAt) {
    root r;
    std::memcpy(&r, page.data() + at, sizeof r);
    const bool valid = r.checksum == root_checksum(r, uuid_seed_) &&
                       (r.state == kApplied || r.state == kCommitted) && at == kRootAt[r.seq % 2];
    if (valid && (!found || r.seq > root_.seq)) {
      root_ = r;
      found = true;
    }
  }
  if (!found) corrupt("neither root record is valid");
  end_ = writeback_from_ = records_at_;
}

void epoch_log::read_stripe_table() {
  stripe_table_head t{};
  std::size_t got = 0;
  pread_all(fd_, &t, sizeof t, kHeaderPage, path_, got);
  const std::uint64_t most = sizeof t + std::uint64_t{kMaxStripes} * (4 + kMaxStripePathBytes) + 8;
  if (got != sizeof t || t.count < 2 || t.count > kMaxStripes ||
      t.bytes < sizeof t + 4ull * t.count || t.bytes > most || t.bytes % 8 != 0 ||
      t.line_bytes == 0 || t.line_bytes > kMaxRecordBytes) {
    corrupt("its stripe table is damaged or cut short");
  }
  std::vector<std::byte> table(t.bytes);
  pread_all(fd_, table.data(), table.size(), kHeaderPage, path_, got);
  if (got != table.size() || t.checksum != table_checksum(table, uuid_seed_)) {
    corrupt("its stripe table fails its checksum");
  }
  stripe_set s{{}, t.line_bytes};
  std::size_t at = sizeof t;
  for (std::uint32_t k = 0; k < t.count; ++k) {
    std::uint32_t n = 0;
    if (at + 4 > table.size()) corrupt("its stripe table is damaged");
    std::memcpy(&n, table.data() + at, 4);
    if (n == 0 || n > kMaxStripePathBytes || at + 4 + n > table.size()) {
      corrupt("its stripe table is damaged");
    }
    s.paths.emplace_back(reinterpret_cast<const char*>(table.data() + at + 4), n);
    if (s.paths.back().find('\0') != std::string::npos) corrupt("its stripe table is damaged");
    at += 4 + n;
  }
  stripes_ = std::move(s);
  records_at_ = records_start(t.bytes);
}

std::uint64_t epoch_log::file_bytes() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw_error(errc::io, "cannot stat " + path_ + ": " + sys_reason(errno));
  return static_cast<std::uint64_t>(st.st_size);
}

void epoch_log::sync_log(const char* what) const {
  if (::fdatasync(fd_) != 0) {
    throw_error(errc::io, std::string("fdatasync of the epoch log ") + path_ + " (" + what +
                              ") failed: " + sys_reason(errno));
  }
}

void epoch_log::write_root(const root& r) {
  root sealed = r;
  sealed.checksum = root_checksum(sealed, uuid_seed_);
  pwrite_all(fd_, &sealed, sizeof sealed, kRootAt[sealed.seq % 2], path_);
  sync_log("root record");
  root_ = sealed;
}

void epoch_log::truncate_records() {
  if (::ftruncate(fd_, static_cast<off_t>(records_at_)) != 0) {
    throw_error(errc::io, "cannot truncate the epoch log " + path_ + ": " + sys_reason(errno));
  }
  sync_log("emptied");
  end_ = records_at_;
  writeback_from_ = records_at_;
  records_ = 0;
  chain_ = 0;
  staged_appended_ = false;
}

void epoch_log::append(std::uint64_t at, const std::byte* src, std::uint64_t bytes,
                       const std::uint32_t* mask, std::uint32_t mask_words) {
  add(kRecordKind, at, src, bytes, mask, mask_words, 0);
}

void epoch_log::append_staged(std::uint64_t at, const std::byte* src, std::uint64_t bytes,
                              const std::uint32_t* mask, std::uint32_t mask_words,
                              std::uint64_t staged_at) {
  if (!staged_refs_) {
    throw_error(errc::invalid_argument, "epoch log " + path_ +
                                            " was created by an older gpmkit and takes staged "
                                            "lines as copies (append), not by their place");
  }
  add(kStagedKind, at, src, bytes, mask, mask_words, staged_at);
  staged_appended_ = true;
}

void epoch_log::add(std::uint32_t kind, std::uint64_t at, const std::byte* src, std::uint64_t bytes,
                    const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t staged_at) {
  if (root_.state != kApplied) {
    throw_error(errc::invalid_argument, "epoch log " + path_ + ": epoch " +
                                            std::to_string(root_.epoch) +
                                            " is committed and not applied yet: recover first");
  }
  const bool staged = kind == kStagedKind;
  const std::uint64_t place = staged ? sizeof staged_at : 0;
  const std::uint64_t mask_bytes = mask != nullptr ? mask_words * 4ull : 0;
  const std::uint64_t payload = padded(place + mask_bytes + (staged ? 0 : bytes));
  buf_.assign(sizeof(record_head) + payload, std::byte{0});
  std::byte* p = buf_.data() + sizeof(record_head);
  if (staged) std::memcpy(p, &staged_at, place);
  if (mask != nullptr) std::memcpy(p + place, mask, mask_bytes);
  if (!staged) std::memcpy(p + mask_bytes, src, bytes);
  record_head h{kind, mask != nullptr ? mask_words : 0, root_.epoch + 1, at, bytes, 0, 0};
  h.payload_checksum = payload_checksum(p, payload, staged ? src : nullptr, bytes, seed(end_));
  h.checksum = head_checksum(h, seed(end_));
  std::memcpy(buf_.data(), &h, sizeof h);
  pwrite_all(fd_, buf_.data(), buf_.size(), end_, path_);
  chain_ = checksum64(&h.checksum, sizeof h.checksum, chain_);
  end_ += buf_.size();
  // Write-behind: the disk writes the records while the next ones are made, and commit()'s
  // fdatasync waits for less. In whole pages, a step at a time: a record appended to a page
  // under writeback waits for it, and a staged line's record is 56 bytes (started record by
  // record, they made a sync on the host emulator slower than copying the lines into the log).
  const std::uint64_t full = end_ / kHeaderPage * kHeaderPage;
  if (full >= writeback_from_ + kWritebackStep) {
    start_writeback(fd_, writeback_from_, full - writeback_from_);
    writeback_from_ = full;
  }
  bytes_written_ += buf_.size();
  ++records_;
  crash_point("ooc.log.append");
}

bool epoch_log::open_staging() const {
  if (staging_fd_ < 0) {
    staging_fd_ = ::open(staging_path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  }
  return staging_fd_ >= 0;
}

void epoch_log::read_staged(std::uint64_t at, std::byte* dst, std::uint64_t bytes,
                            const std::string& rec) const {
  const std::string what = rec + " names bytes [" + std::to_string(at) + ", " +
                           std::to_string(at + bytes) + ") of the staging file " + staging_path_;
  if (staging_fd_ < 0) {
    if (!open_staging() && (errno == ENOENT || errno == ELOOP)) {
      corrupt(what + ", which is missing (or not a file)");
    }
    if (staging_fd_ < 0) {
      throw_error(errc::io,
                  "cannot open the staging file " + staging_path_ + ": " + sys_reason(errno));
    }
    struct stat st {};
    if (::fstat(staging_fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(std::exchange(staging_fd_, -1));
      corrupt(what + ", which is not a regular file");
    }
  }
  std::size_t got = 0;
  pread_all(staging_fd_, dst, bytes, at, staging_path_, got);
  if (got != bytes) corrupt(what + ", which holds fewer: it was cut short");
}

void epoch_log::commit() {
  if (staged_appended_) {
    // The staged records' bytes are durable before the commit that makes them the next epoch.
    if (!open_staging() || ::fdatasync(staging_fd_) != 0) {
      throw_error(errc::io, "fdatasync of the staging file " + staging_path_ +
                                " failed: " + sys_reason(errno));
    }
  }
  sync_log("records");
  crash_point("ooc.log.written");
  write_root({root_.seq + 1, root_.epoch + 1, kCommitted, 0, records_, end_, chain_, 0});
  own_records_ = true;
  crash_point("ooc.log.committed");
}

template <class F>
void epoch_log::walk(F&& f, bool check_payloads) const {
  std::uint64_t pos = records_at_;
  std::uint64_t chain = 0;
  std::vector<std::byte> payload, staged_bytes;
  const std::string which = "record ";
  for (std::uint64_t i = 0; i < root_.records; ++i) {
    const std::string rec = which + std::to_string(i) + " of committed epoch " +
                            std::to_string(root_.epoch) + " (at byte " + std::to_string(pos) + ")";
    record_head h{};
    std::size_t got = 0;
    pread_all(fd_, &h, sizeof h, pos, path_, got);
    if (got != sizeof h) corrupt(rec + " is cut short: the log was truncated");
    const bool staged = h.kind == kStagedKind && staged_refs_;
    if ((h.kind != kRecordKind && !staged) || h.checksum != head_checksum(h, seed(pos)) ||
        h.epoch != root_.epoch || h.mask_words > kMaxMaskWords || h.bytes > kMaxRecordBytes ||
        (h.mask_words != 0 && h.mask_words * 32ull * kMaskGranule < h.bytes)) {
      corrupt(rec + " fails its checksum");
    }
    const std::uint64_t place = staged ? sizeof(std::uint64_t) : 0;
    const std::uint64_t mask_bytes = h.mask_words * 4ull;
    payload.resize(padded(place + mask_bytes + (staged ? 0 : h.bytes)));
    pread_all(fd_, payload.data(), payload.size(), pos + sizeof h, path_, got);
    if (got != payload.size()) corrupt(rec + " is cut short: the log was truncated");
    const std::byte* bytes = payload.data() + place + mask_bytes;
    if (staged) {
      std::uint64_t at = 0;
      std::memcpy(&at, payload.data(), sizeof at);
      staged_bytes.resize(h.bytes);
      read_staged(at, staged_bytes.data(), h.bytes, rec);
      bytes = staged_bytes.data();
    }
    if (check_payloads &&
        h.payload_checksum != payload_checksum(payload.data(), payload.size(),
                                               staged ? bytes : nullptr, h.bytes, seed(pos))) {
      corrupt(rec + " has a payload" +
              (staged ? " (its bytes in the staging file " + staging_path_ + ")" : "") +
              " that fails its checksum");
    }
    chain = checksum64(&h.checksum, sizeof h.checksum, chain);
    const auto* mask = h.mask_words != 0
                           ? reinterpret_cast<const std::uint32_t*>(payload.data() + place)
                           : nullptr;
    f(h, mask, bytes);
    pos += sizeof h + payload.size();
  }
  if (pos != root_.end || chain != root_.chain) {
    corrupt("the records of committed epoch " + std::to_string(root_.epoch) +
            " do not match its root record");
  }
}

gpm::ooc::epoch_recovery epoch_log::apply(const epoch_target& data) {
  if (data.size() != stripes_.paths.size()) {
    throw_error(errc::invalid_argument, "epoch log " + path_ + ": " + std::to_string(data.size()) +
                                            " files given for " + describe(stripes_));
  }
  // Where byte `at` of the range lies: its file and the byte of that file's range.
  const std::uint64_t n = data.size();
  const std::uint64_t lb = stripes_.line_bytes;
  const auto place = [&](std::uint64_t at) -> std::pair<const backing_file*, std::uint64_t> {
    if (n == 1) return {data.front(), at};
    const std::uint64_t line = at / lb;
    return {data[line % n], line / n * lb + at % lb};
  };
  // The file and byte a record writes, or corrupt if it lies outside the range.
  const auto target = [&](const record_head& h) {
    const auto [file, at] = place(h.at);
    if ((n > 1 && h.at % lb + h.bytes > lb) || at > file->size() || h.bytes > file->size() - at) {
      corrupt("a record of epoch " + std::to_string(root_.epoch) + " writes bytes [" +
              std::to_string(h.at) + ", " + std::to_string(h.at + h.bytes) +
              ") of the range, outside " +
              (n == 1 ? "its " + std::to_string(file->size()) + " bytes"
                      : "a line of its file's " + std::to_string(file->size()) + " bytes"));
    }
    return std::pair{file, at};
  };
  // A log this object did not commit (one a crash left) has every record checked, payloads
  // included, before the first byte is written: a bad log changes nothing. Records this object
  // appended and committed were checksummed as they were written; checking them again read and
  // checksummed every changed byte twice more.
  const bool checked = !own_records_;
  if (checked) {
    walk([&](const record_head& h, const std::uint32_t*, const std::byte*) { target(h); }, true);
  }
  gpm::ooc::epoch_recovery rep;
  walk(
      [&](const record_head& h, const std::uint32_t* mask, const std::byte* bytes) {
        const auto [file, at] = target(h);
        file->write_masked(at, bytes, h.bytes, mask, h.mask_words);
        file->start_writeback(at, h.bytes);  // the datasync below then waits for less
        ++rep.records;
        rep.bytes += h.bytes;
        crash_point("ooc.apply");
      },
      false);
  bytes_applied_ += rep.bytes;
  for (const backing_file* f : data) f->datasync();
  crash_point("ooc.applied");
  write_root({root_.seq + 1, root_.epoch, kApplied, 0, 0, records_at_, 0, 0});
  own_records_ = false;
  crash_point("ooc.published");
  truncate_records();
  rep.epoch = root_.epoch;
  return rep;
}

gpm::ooc::epoch_recovery epoch_log::recover(const epoch_target& data) {
  if (root_.state == kCommitted) {
    gpm::ooc::epoch_recovery rep = apply(data);
    rep.replayed = true;
    return rep;
  }
  gpm::ooc::epoch_recovery rep;
  rep.epoch = root_.epoch;
  const std::uint64_t size = file_bytes();
  if (size > records_at_ || records_ != 0) {
    rep.discarded_bytes = size > records_at_ ? size - records_at_ : 0;
    truncate_records();
  }
  return rep;
}

gpm::ooc::epoch_log_info epoch_log::info() const {
  gpm::ooc::epoch_log_info i;
  i.log_path = path_;
  i.staging_path = staging_path_;
  i.exists = true;
  i.data_file = data_name_;
  i.offset = offset_;
  if (stripes_.paths.size() > 1) {
    i.stripes = stripes_.paths;
    i.stripe_line_bytes = stripes_.line_bytes;
  }
  i.uuid = format::uuid_string(uuid_);
  i.created_ns = created_ns_;
  i.epoch = root_.epoch;
  i.pending = root_.state == kCommitted;
  i.log_bytes = file_bytes();
  if (i.pending) {
    i.records = root_.records;
    walk(
        [&](const record_head& h, const std::uint32_t*, const std::byte*) {
          i.record_bytes += h.bytes;
          i.staged_records += h.kind == kStagedKind;
        },
        true);
  }
  const std::uint64_t committed_end = i.pending ? root_.end : records_at_;
  i.discard_bytes = i.log_bytes > committed_end ? i.log_bytes - committed_end : 0;
  return i;
}

}  // namespace gpm::detail::ooc

namespace gpm::ooc {

namespace {

bool log_exists(const std::string& log) {
  struct stat st {};
  if (::lstat(log.c_str(), &st) == 0) return true;
  if (errno != ENOENT) throw_error(errc::io, "cannot stat " + log + ": " + std::strerror(errno));
  return false;
}

}  // namespace

epoch_log_info inspect_epoch_log(const std::string& path, std::uint64_t offset) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) detail::ooc::require_regular(st, path);
  const std::string log = epoch_log_path(path, offset);
  if (!log_exists(log)) {
    epoch_log_info i;
    i.log_path = log;
    return i;
  }
  return detail::ooc::epoch_log::open_read_only(path, offset).info();
}

epoch_recovery recover_epoch_log(const std::string& path, std::uint64_t offset) {
  const std::string log = epoch_log_path(path, offset);
  // The range's files (the log's stripe table names them all), opened for writing: bytes from
  // `offset` of each.
  const auto open_range = [&](const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      throw_error(errno == ENOENT ? errc::not_found : errc::io,
                  "cannot recover " + file + ": " + std::strerror(errno));
    }
    detail::ooc::require_regular(st, file);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (offset >= size) {
      throw_error(errc::invalid_argument, "cannot recover bytes from " + std::to_string(offset) +
                                              " of " + file + ": the file holds " +
                                              std::to_string(size) + " bytes");
    }
    return std::make_unique<detail::ooc::backing_file>(file, size - offset, offset, true, false,
                                                       false);
  };
  auto first = open_range(path);
  if (!log_exists(log)) return {};
  detail::ooc::epoch_log l(path, offset, nullptr);
  std::vector<std::unique_ptr<detail::ooc::backing_file>> others;
  detail::ooc::epoch_target files{first.get()};
  for (std::size_t k = 1; k < l.stripes().paths.size(); ++k) {
    others.push_back(open_range(l.stripes().paths[k]));
    files.push_back(others.back().get());
  }
  const epoch_recovery rep = l.recover(files);
  // The staging file a crashed mapping left: its lines are in the file or were never committed.
  // (The range is locked for writing here, so no mapping uses it.)
  ::unlink(l.staging_path().c_str());
  return rep;
}

}  // namespace gpm::ooc
