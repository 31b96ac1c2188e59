// Pool backing: where pool files live, which file systems a GPU can map, creating and opening the
// file, the single-writer lock, the memory mapping and its CUDA registration. Knows nothing of
// the pool's format.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <gpm/pool/options.hpp>

namespace gpm::detail {

enum class backing_kind { shmem_file, dax_device, disk_file };

struct mapping {
  std::string path;
  int fd = -1;
  char* host = nullptr;
  char* device = nullptr;  // set once registered with CUDA
  std::uint64_t bytes = 0;
  backing_kind kind = backing_kind::shmem_file;
  bool writable = false;

  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping();  // unregisters, unmaps, closes (which releases the lock)
};

// Where a pool's files live: worked out here and nowhere else (docs/pool.md).
struct pool_paths {
  std::string pm_dir;         // pool_options::pm_dir, else $GPMKIT_PM_DIR, else /dev/shm/gpmkit
  std::string snapshot_root;  // pool_options::snapshot_dir, else $GPMKIT_SNAPSHOT_DIR, else
                              // /var/tmp/gpmkit: the directory of all snapshots
  std::string pool;           // the pool file: `name` itself if it holds a '/', else pm_dir/name
  std::string pool_absolute;  // `pool` made absolute and normal: the pool's identity on disk
  // The pool's snapshot directory: snapshot_root/<file name>.<16 hex digits>.snapshot, the digits
  // a hash of pool_absolute, so that pools of one name in different directories never share one.
  std::string snapshot;
};

// The directories `o` names and, for a non-empty `name`, that pool's file and snapshot directory
// (empty otherwise).
pool_paths locate(const pool_options& o, const std::string& name = {});

// The path itself if it exists, else its nearest existing ancestor.
std::string nearest_existing(const std::string& path);

// The kind of storage a path (or, if it does not exist yet, its nearest existing ancestor)
// lives on, and the name of its file system for messages.
backing_kind classify(const std::string& path, std::string* fs_name);

// Releases nothing: opens the file a pool (or what is left of one) occupies and takes its write
// lock, proving no one has it open. Any regular file will do, valid pool or not; special files
// (directories, FIFOs, sockets, devices other than device-DAX) are refused before they are
// opened, here and in open_backing, with errc::invalid_argument.
std::unique_ptr<mapping> lock_exclusively(const std::string& path);

// Whether files at `path` get huge pages: hugetlbfs, or a tmpfs mounted huge=always/within_size.
bool huge_page_backed(const std::string& path);

// Throws errc::unsupported, explaining why and what to do, if pages of files in `dir` cannot be
// mapped into a GPU (writable shared mappings of disk files cannot be pinned by the driver).
void require_gpu_mappable_dir(const std::string& dir);

// Creates `path` (which must not exist) with `bytes` reserved, mapped read-write and locked
// exclusively. The file is created under a temporary name; publish() gives it its real name.
std::unique_ptr<mapping> create_backing(const std::string& path, std::uint64_t bytes);
void publish(mapping& m, const std::string& final_path);

// Opens an existing pool file or device, locked (exclusive if writable, shared otherwise).
std::unique_ptr<mapping> open_backing(const std::string& path, bool writable);

// Whether the file under `m` is now shorter than the mapping: another process truncated it, and
// touching the part that is gone would kill this process with SIGBUS.
bool file_shrank(const mapping& m);

// Reads bytes [offset, offset + bytes) of the file under `m` with pread, not through the mapping;
// throws errc::corrupt, saying the file was truncated, when they are no longer all there.
void read_file(const mapping& m, std::uint64_t offset, void* out, std::uint64_t bytes);

// Registers the mapping with CUDA according to `how`; reports host-only use through `notice`.
void map_into_gpu(mapping& m, gpu_mapping how,
                  const std::function<void(const std::string&)>& notice);

}  // namespace gpm::detail
