// Pool snapshots: power-loss durability for pools that live in host memory. A snapshot directory
// holds an image of the pool, a table of per-page checksums and a manifest; a new snapshot writes
// only the pages whose checksum changed, first to a journal that the manifest then commits, and
// then into the image. A power loss at any moment leaves the previous or the new snapshot intact
// and verifiable (docs/format.md, "Snapshots", gives the protocol and its fsync discipline).
//
// All file operations go through snapshot_fs so that tests can replace the disk with a model
// that forgets everything not made durable by fsync (tests/pool/snapshot_power_loss_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gpm/pool/options.hpp>

namespace gpm::detail {

// The file operations a snapshot needs, by path. Writes create missing files. Nothing is durable
// before sync_file (contents) and sync_dir (names in that directory).
class snapshot_fs {
 public:
  virtual ~snapshot_fs() = default;
  virtual std::optional<std::uint64_t> file_size(const std::string& path) = 0;
  virtual void read_at(const std::string& path, std::uint64_t offset, void* buf,
                       std::uint64_t len) = 0;  // throws errc::io on a short read
  virtual void write_at(const std::string& path, std::uint64_t offset, const void* buf,
                        std::uint64_t len) = 0;
  virtual void truncate(const std::string& path, std::uint64_t size) = 0;
  virtual void sync_file(const std::string& path) = 0;
  virtual void rename(const std::string& from, const std::string& to) = 0;
  virtual void remove(const std::string& path) = 0;    // no error if missing
  virtual void make_dir(const std::string& path) = 0;  // parents too; no error if present
  virtual void sync_dir(const std::string& path) = 0;
};

// Reads `bytes` bytes of the pool at `offset` into `out`, or throws. A snapshot reads the pool
// through this, not through the pool's mapping: if another process truncates the pool file, a
// read gives a clear error where a load from the mapping would kill the process with SIGBUS.
using pool_reader = std::function<void(std::uint64_t offset, void* out, std::uint64_t bytes)>;

// The real file system (POSIX calls; write_at keeps files open until synced).
std::unique_ptr<snapshot_fs> make_posix_fs();

// The manifest: what the current snapshot is, and of which pool (its uuid, and the hash of its
// absolute path: a snapshot belongs to exactly one pool). Replaced atomically (write, fsync,
// rename, fsync the directory).
struct snapshot_manifest {
  std::uint8_t uuid[16] = {};
  std::uint64_t path_hash = 0;  // pool_path_hash() of the pool's absolute path
  std::uint64_t pool_bytes = 0;
  std::uint64_t seq = 0;
  bool journal_pending = false;        // committed journal not yet applied to the image
  std::uint64_t journal_checksum = 0;  // of journal.<seq> (when pending)
  std::uint64_t table_checksum = 0;    // of the page-checksum table of this snapshot
  std::uint64_t taken_ns = 0;
};

// The snapshot in `dir` of the pool at `pool_path` (absolute, as locate() gives it).
class snapshot_store {
 public:
  snapshot_store(snapshot_fs& fs, std::string dir, std::string pool_path);

  // The manifest, if the directory holds a valid one (throws errc::corrupt if it is damaged,
  // errc::version if an older gpmkit wrote it).
  std::optional<snapshot_manifest> manifest();

  // Takes snapshot seq + 1 of the pool of `pool_bytes` bytes that `read` reads (its header names
  // the uuid). Refuses (errc::already_exists) a directory holding the snapshot of another pool:
  // another uuid, or another path.
  snapshot_result take(const pool_reader& read, std::uint64_t pool_bytes);

  // Applies a committed journal left by a crash; idempotent.
  void recover();

  // Writes the newest snapshot into `out` (manifest().pool_bytes bytes), verifying every page
  // against its checksum; throws errc::corrupt naming the first bad page, errc::already_exists if
  // the snapshot is of a pool at another path.
  snapshot_result restore_into(char* out);

  const std::string& dir() const { return dir_; }

 private:
  std::string path(const std::string& name) const;
  void write_manifest(const snapshot_manifest& m);
  void require_ours(const snapshot_manifest& m) const;
  std::vector<std::uint64_t> read_table(const snapshot_manifest& m);
  snapshot_result take_first(const pool_reader& read, std::uint64_t pool_bytes,
                             const std::uint8_t (&uuid)[16]);
  // Applies the committed journal of `m` to the image and page table, after checking it against
  // the manifest's checksum. `table_after`: the page table with the journal's entries, from
  // take(), which has just written the journal and checksummed it as it went (no check then);
  // else (recovery) the table is read from the snapshot.
  void apply_journal(const snapshot_manifest& m,
                     const std::vector<std::uint64_t>* table_after = nullptr);

  snapshot_fs& fs_;
  std::string dir_;
  std::string pool_path_;
  std::vector<std::uint64_t> table_;  // page checksums of the current snapshot, once loaded
  std::uint64_t table_seq_ = 0;
};

// Held while a snapshot is taken, restored or removed, so that none of these interleaves with a
// change of the snapshot (for example two processes snapshotting read-only opens of one pool, or
// a restore during a snapshot): an open-file-description lock on `<dir>/lock`, released when the
// object goes. `changes` (take, remove) makes the directory if missing and locks exclusively;
// otherwise (restore) the lock is shared, taken on a read-only descriptor so that a restore works
// from a snapshot it cannot write, and a missing lock file means nobody can hold it. Another
// holder is errc::busy at once.
class snapshot_lock {
 public:
  snapshot_lock(const std::string& dir, bool changes);
  snapshot_lock(const snapshot_lock&) = delete;
  snapshot_lock& operator=(const snapshot_lock&) = delete;
  ~snapshot_lock();

 private:
  int fd_ = -1;
};

// Deletes the snapshot directory `dir` and the files a snapshot writes in it (manifest, image,
// page table, journals, their temporaries), and nothing else: a directory that holds anything
// else, or a `dir` that is not a directory, is refused (errc::invalid_argument, naming what was
// found) before anything is deleted. A missing `dir` is no error.
void remove_snapshot(const std::string& dir);

// The hash of a pool's absolute path that names its snapshot directory and is recorded in its
// manifest.
std::uint64_t pool_path_hash(const std::string& absolute_path);

// Checksum of one page as recorded in snapshot tables.
std::uint64_t page_checksum(const char* page, std::uint64_t page_index);

}  // namespace gpm::detail
