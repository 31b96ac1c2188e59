// gpm::ooc epochs: what makes a crash-consistent mapping's sync() all-or-nothing
// (mapping_options::crash_consistent; docs/out-of-core.md, "Crash-consistent sync"). Each sync of
// such a mapping is an epoch: the changed bytes go to a redo log beside the data file (its epoch
// log, "<file>.ooc-log"), are committed there, and only then written in place; a crash at any
// moment leaves the file at the previous epoch or the new one, and recovery (at the next mapping
// of the range, or recover() below) finishes a committed epoch or drops an uncommitted one.
// This header: where a range's epoch log lives, what it holds, and recovery without a mapping.
// Host only; no CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpm::ooc {

// The epoch log of bytes [offset, ...) of `path`: "<path>.ooc-log", or "<path>@<offset>.ooc-log"
// for a range that does not start at 0 (so disjoint ranges of one file have their own).
std::string epoch_log_path(const std::string& path, std::uint64_t offset = 0);

// What an epoch log holds (inspect_epoch_log).
struct epoch_log_info {
  std::string log_path;
  bool exists = false;       // false: the range was never mapped crash-consistently
  std::string data_file;     // the data file's name as the log records it
  std::uint64_t offset = 0;  // the range's start in it
  // A range striped over several files: their paths in stripe order (data_file is the first's
  // name) and the stripe unit; empty and 0 for one file.
  std::vector<std::string> stripes;
  std::uint64_t stripe_line_bytes = 0;
  std::string uuid;  // the log's identity
  std::uint64_t created_ns = 0;
  std::uint64_t epoch = 0;  // the newest epoch the log has committed
  // Whether epoch `epoch` is committed but not yet known to be in the data file (a crash hit
  // between the commit and its publication): recovery writes it in place.
  bool pending = false;
  std::uint64_t records = 0;        // records of the pending epoch (0 when none is pending)
  std::uint64_t record_bytes = 0;   // bytes of data they carry
  // The range's staging file (beside the log), and how many records of the pending epoch name
  // bytes in it (lines staged between syncs): while one does, it belongs with the log.
  std::string staging_path;
  std::uint64_t staged_records = 0;
  std::uint64_t log_bytes = 0;      // the log file's size
  std::uint64_t discard_bytes = 0;  // bytes past the last commit (a crashed sync's records)
};

// Reads the epoch log of the range without changing anything (no lock is taken). Throws
// gpm::error: corrupt (not an epoch log, truncated header, checksum mismatch, no valid root),
// version, layout_mismatch (the log belongs to another file or range), invalid_argument (`path`
// is a directory, FIFO, device or socket), io. A missing log is not an error: exists is false.
epoch_log_info inspect_epoch_log(const std::string& path, std::uint64_t offset = 0);

// What recovery did.
struct epoch_recovery {
  std::uint64_t epoch = 0;           // the epoch the range is at afterwards
  bool replayed = false;             // a committed epoch was written in place
  std::uint64_t records = 0;         // records replayed
  std::uint64_t bytes = 0;           // data bytes replayed
  std::uint64_t discarded_bytes = 0; // log bytes of an uncommitted epoch dropped
};

// Brings bytes [offset, end of file) of `path` (and of the other files of its range, when the log
// says the range is striped over several) to the newest committed epoch of its log: replays
// a committed epoch in place (fdatasync), publishes it and empties the log, or drops the records
// of an uncommitted one. Idempotent: a crash during recovery, then recovery again, gives the same
// file. Locks the range for writing while it runs (errc::busy if it is mapped). Throws gpm::error:
// not_found (no such file), invalid_argument (not a regular file), busy, corrupt (a committed epoch's record fails its checksum: nothing
// is written, nothing deleted), version, layout_mismatch, io. Without an epoch log: nothing to
// do. mapping's constructor does the same for every mapping that writes.
epoch_recovery recover_epoch_log(const std::string& path, std::uint64_t offset = 0);

}  // namespace gpm::ooc
