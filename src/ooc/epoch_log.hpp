// The epoch log of a crash-consistent gpm::ooc mapping (include/gpm/ooc/epoch.hpp): a redo log in
// a file beside the data file. Layout (little-endian; structs in epoch_format.hpp;
// docs/out-of-core.md, "Crash-consistent sync"):
//   [0, 4096)     header: gpm::format::object_header ("GPMOOCLG") + the data file's name and the
//                 range's offset, checksummed, written once;
//                 two root slots at 1024 and 2048 (double-buffered, checksummed, newest valid seq
//                 wins): {epoch, state (applied | committed), records, end, chain}
//   [4096, ...)   a striped range only (incompatible feature kStriped): the stripe table, the
//                 paths of its files in stripe order, checksummed, written once
//   [records, end) records of the next epoch, from 4096 (or the page after the stripe table): a
//                 48-byte head {kind, mask words, epoch, offset in the range, bytes, payload
//                 checksum, head checksum} and a payload (mask words, then the bytes; padded to
//                 8). Checksums are seeded with the log's uuid and the record's position, so a
//                 stale or transplanted record never validates.
// Staged records (incompatible feature kStaged, in every log this gpmkit creates): a line that a
// crash-consistent mapping staged between syncs lies in the staging file beside the log
// (staging_path()); its record holds the line's place there instead of its bytes (payload: that
// place, then the mask words), and its payload checksum covers the bytes the staging file holds.
// commit() fdatasyncs the staging file before the log, and its lines must not change until the
// epoch is applied (the host cache stages a line again elsewhere meanwhile), so an epoch writes a
// staged line once more (in place), not twice (log, then in place).
// A striped range has one log, beside its first file, whose records address the range (lines
// striped over the files): one commit makes an epoch of every file durable at once.
// An epoch: append the records, fdatasync, commit (root: epoch + 1, committed, with the record
// count, end and a chain of the records' checksums), fdatasync, write the records in place,
// fdatasync the data file, publish (root: applied), fdatasync, empty the log. Recovery: a
// committed root is applied again (redo records are absolute bytes: idempotent); an applied
// root drops whatever follows the header. Never deletes a log; a log that fails validation is an
// error. Host only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gpm/ooc/detail/file.hpp>
#include <gpm/ooc/epoch.hpp>

#include "epoch_format.hpp"

namespace gpm::detail::ooc {

// The data files of a range: one, or several with the range's lines striped over them (line l in
// file l % n, as line l / n of that file's range; gpm::ooc::mapping's striping).
struct stripe_set {
  std::vector<std::string> paths;
  std::uint64_t line_bytes = 0;  // the stripe unit (unused with one file)
  bool operator==(const stripe_set&) const = default;
};

// What an epoch is written into: the range's files, open, in the log's stripe order.
using epoch_target = std::vector<const backing_file*>;

class epoch_log {
 public:
  // Opens the epoch log of the range at `offset` of `data_path` (its first file, when striped) for
  // appending epochs. With `files`: creating it (atomically: written aside, then renamed) if it
  // does not exist, and refusing (layout_mismatch) a log of another stripe set; without, the log
  // must exist and says what its files are (stripes()). Validates it. Throws corrupt, version,
  // layout_mismatch, not_found, io.
  epoch_log(const std::string& data_path, std::uint64_t offset, const stripe_set* files);
  // Opens an existing log for reading only (inspection): no creation, no writes.
  static epoch_log open_read_only(const std::string& data_path, std::uint64_t offset);
  ~epoch_log();
  epoch_log(epoch_log&& o) noexcept;
  epoch_log& operator=(epoch_log&&) = delete;
  epoch_log(const epoch_log&) = delete;
  epoch_log& operator=(const epoch_log&) = delete;

  // Finishes a committed epoch into `data` (the range, opened for writing) or drops the records
  // of an uncommitted one. Throws corrupt (a committed record fails validation), io.
  gpm::ooc::epoch_recovery recover(const epoch_target& data);

  // Appends a record of the next epoch: `bytes` bytes at byte `at` of the range, of which those
  // `mask` marks (null: all) changed. Throws io (ENOSPC: the disk is full).
  void append(std::uint64_t at, const std::byte* src, std::uint64_t bytes,
              const std::uint32_t* mask, std::uint32_t mask_words);
  // The same for bytes that lie at byte `staged_at` of the staging file, as `src` holds them (the
  // caller read them from there), when stages_by_reference(): the record names their place.
  void append_staged(std::uint64_t at, const std::byte* src, std::uint64_t bytes,
                     const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t staged_at);
  // Whether records may name bytes of the staging file (a log an older gpmkit created takes
  // copies: append()).
  bool stages_by_reference() const { return staged_refs_; }
  // The staging file of the range: the log's path + ".staged".
  const std::string& staging_path() const { return staging_path_; }
  std::uint64_t pending_records() const { return records_; }
  // Makes the appended records the committed next epoch (the point of no return).
  void commit();
  // Writes the committed epoch into `data`, fdatasyncs it, publishes it and empties the log. The
  // records are checked first, all of them, unless this object appended and committed them.
  gpm::ooc::epoch_recovery apply(const epoch_target& data);

  std::uint64_t epoch() const { return root_.epoch; }
  // Whether an epoch is committed and not yet applied (recover() applies it).
  bool committed() const { return root_.state == format::ooc::kCommitted; }
  // The range's files: the data file alone, or the stripe table's.
  const stripe_set& stripes() const { return stripes_; }
  std::uint64_t bytes_written() const { return bytes_written_; }
  // Bytes apply() wrote into the data files (the epochs' changed bytes, in place).
  std::uint64_t bytes_applied() const { return bytes_applied_; }
  gpm::ooc::epoch_log_info info() const;

  using root = format::ooc::epoch_root;

 private:
  epoch_log() = default;
  void open_existing(bool writable);
  void read_stripe_table();
  void create(const stripe_set& files);
  std::uint64_t file_bytes() const;
  void write_root(const root& r);
  void truncate_records();
  void sync_log(const char* what) const;
  // Opens the staging file for reading once (errno says why not); its fd serves reads and
  // fdatasync alike.
  bool open_staging() const;
  void add(std::uint32_t kind, std::uint64_t at, const std::byte* src, std::uint64_t bytes,
           const std::uint32_t* mask, std::uint32_t mask_words, std::uint64_t staged_at);
  // Reads `bytes` at byte `at` of the staging file for record `rec`; corrupt if it is missing or
  // holds fewer.
  void read_staged(std::uint64_t at, std::byte* dst, std::uint64_t bytes,
                   const std::string& rec) const;
  // Walks the committed records of root_, checks each (its head, its place in the log and the
  // chain of heads; its payload's checksum if `check_payloads`) and calls f(head, mask, bytes) on
  // each (mask null: all bytes changed); throws corrupt on the first bad one.
  template <class F>
  void walk(F&& f, bool check_payloads) const;
  std::uint64_t seed(std::uint64_t pos) const;
  [[noreturn]] void corrupt(const std::string& what) const;

  std::string path_;              // the log
  std::string staging_path_;      // the staging file, path_ + ".staged" (open_existing)
  mutable int staging_fd_ = -1;   // opened when a staged record is appended or read
  bool staged_refs_ = false;      // kStaged: records may name bytes of the staging file
  bool staged_appended_ = false;  // the next epoch has staged records (commit syncs the file)
  std::string data_path_;         // the data file, for messages
  std::string data_name_;         // its name as the log records it
  std::uint64_t offset_ = 0;
  stripe_set stripes_;
  std::uint64_t records_at_ = gpm::format::ooc::kHeaderPage;  // where the records start
  int fd_ = -1;
  std::uint8_t uuid_[16] = {};
  std::uint64_t created_ns_ = 0;
  std::uint64_t uuid_seed_ = 0;
  root root_{};
  // The next epoch being appended.
  std::uint64_t end_ = 0;
  std::uint64_t writeback_from_ = 0;  // the records before it are on their way to the disk
  static constexpr std::uint64_t kWritebackStep = 1 << 20;
  std::uint64_t records_ = 0;
  std::uint64_t chain_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::uint64_t bytes_applied_ = 0;
  // The committed epoch's records are the ones this object appended (commit() to the publish in
  // apply()): apply() writes them without checking them again.
  bool own_records_ = false;
  std::vector<std::byte> buf_;
};

}  // namespace gpm::detail::ooc
