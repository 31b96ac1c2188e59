// gpm::pool: a persistent memory pool that host code and GPU kernels share. The pool is a file in
// a tmpfs directory (or a device-DAX node) mapped into the process and registered with CUDA, so
// kernels store straight into it and make stores durable with gpm::persist(). It holds named,
// aligned objects whose allocation and free are crash-atomic, a small root record, and it can
// snapshot itself to disk for power-loss durability. One process opens a pool for writing at a
// time. On-media format: include/gpm/pool/format.hpp, docs/format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/error.hpp>
#include <gpm/pool/options.hpp>
#include <gpm/pool/pool_ref.hpp>

namespace gpm {

namespace format {
struct object_kind;
}

// What a store made durable with gpm::persist() survives.
enum class durability {
  process_crash,  // the pool lives in host memory (tmpfs): kill, GPU fault, OOM of the process
  power_fail,     // device-DAX with a persistent cache domain: also power loss
};
std::string_view to_string(durability d) noexcept;

struct pool_object {
  std::string name;
  std::uint64_t offset = 0;  // from the start of the pool
  std::uint64_t bytes = 0;
  std::uint64_t alignment = 0;
  std::uint64_t type_tag = 0;
};

struct pool_info {
  std::string path;
  std::string layout;
  std::string uuid;
  std::uint16_t major = 0;
  std::uint16_t minor = 0;
  std::uint64_t bytes = 0;
  std::uint64_t heap_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t created_ns = 0;
  std::uint32_t directory_capacity = 0;
  std::size_t objects = 0;
  std::uint64_t root_seq = 0;
  std::uint64_t open_count = 0;
  std::uint64_t last_snapshot_seq = 0;  // from the snapshot manifest; 0: none
  bool clean_shutdown = false;          // the last writer closed the pool
};

// The result of checking a pool file: every inconsistency found, in words.
struct pool_check {
  bool ok = false;
  // Set when the pool could not be examined at all (not_found, busy, io, version: written in a
  // format version this gpmkit does not read, ...): problems then holds that one error's message.
  std::optional<errc> failure;
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  std::optional<pool_info> info;
};

// The storage under a path (or its nearest existing ancestor): what pools there can do.
struct storage_info {
  std::string probe_path;     // the existing path examined
  std::string file_system;    // "tmpfs", "ext4", "device-DAX", ...
  bool gpu_mappable = false;  // a GPU can map pools there: tmpfs-like file systems, device-DAX
  // Pools there get 2 MiB pages (hugetlbfs, or tmpfs mounted with huge=always|within_size).
  // GPU stores into them are faster: docs/pool.md, "Huge pages".
  bool huge_pages = false;
  durability pool_durability = durability::process_crash;  // of a pool stored there
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};
storage_info describe_storage(const std::string& path);

namespace detail {
struct claim_set;
}

// A module's exclusive use of a pool object in this process (pool::claim), released when the
// claim is destroyed, also after the pool was closed. One process opens a pool only once (its
// lock), so claims keep two handles of one process off one object.
class object_claim {
 public:
  object_claim() = default;
  object_claim(object_claim&& other) noexcept;
  object_claim& operator=(object_claim&& other) noexcept;
  object_claim(const object_claim&) = delete;
  object_claim& operator=(const object_claim&) = delete;
  ~object_claim();

 private:
  friend class pool;
  object_claim(std::shared_ptr<detail::claim_set> set, std::string name);
  void release() noexcept;
  std::shared_ptr<detail::claim_set> set_;
  std::string name_;
};

class pool {
 public:
  // Creates a pool of `bytes` bytes (a multiple of 4096) for `layout`. `path` without a '/' is a
  // file in the PM directory. Fails if the file exists, if the directory's file system cannot be
  // mapped into a GPU (see docs/pool.md), or if the space is not available.
  static pool create(const std::string& path, std::uint64_t bytes, std::string_view layout,
                     pool_options options = {});
  // Opens an existing pool created for `layout`, validating everything, finishing an allocation
  // or free interrupted by a crash, and restoring from a snapshot if the file is missing or
  // corrupt (and options allow). Throws gpm::error saying what is wrong and what to do.
  static pool open(const std::string& path, std::string_view layout, pool_options options = {});
  // Validates a pool without modifying it.
  static pool_check check(const std::string& path, pool_options options = {});
  // Deletes the pool file, and its snapshot too if asked. Fails if the pool is open.
  static void remove(const std::string& path, pool_options options = {},
                     bool with_snapshot = false);
  // Recreates the pool file from its newest valid snapshot, replacing the file if present.
  static snapshot_result restore(const std::string& path, pool_options options = {});
  // The file a path names after resolution against the PM directory.
  static std::string resolve(const std::string& path, const pool_options& options = {});
  // The PM directory: options.pm_dir, else $GPMKIT_PM_DIR, else /dev/shm/gpmkit.
  static std::string pm_directory(const pool_options& options = {});
  // The directory of all snapshots: options.snapshot_dir, else $GPMKIT_SNAPSHOT_DIR, else
  // /var/tmp/gpmkit; and the one holding the snapshot of the pool at `path`.
  static std::string snapshot_directory(const pool_options& options = {});
  static std::string snapshot_location(const std::string& path, const pool_options& options = {});
  // Throws errc::unsupported, saying why and what to do, if a GPU-mapped pool cannot live at
  // `path` (create applies this check itself unless the pool is host-only).
  static void require_gpu_mappable(const std::string& path, const pool_options& options = {});

  pool(pool&&) noexcept;
  pool& operator=(pool&&) noexcept;
  ~pool();

  // Marks the pool cleanly closed and unmaps it. Further use throws.
  void close();
  bool is_open() const noexcept { return impl_ != nullptr; }

  pool_ref ref() const;       // the GPU's view (throws errc::no_device when not mapped into a GPU)
  pool_ref host_ref() const;  // the host's view
  template <class T>
  T* host_ptr(std::uint64_t offset) const {
    return host_ref().ptr<T>(offset);
  }

  // Allocates a zero-filled named object; returns its offset. Crash-atomic: after a crash the
  // object exists entirely or not at all.
  std::uint64_t allocate(std::string_view name, std::uint64_t bytes, std::uint64_t alignment = 128,
                         std::uint64_t type_tag = 0);
  std::optional<pool_object> find(std::string_view name) const;
  pool_object get(std::string_view name) const;  // throws errc::not_found
  // The object `name` of a module's structure, its header checked against `kind`
  // (format::validate_header over the object's bytes): how every module opens what it made.
  // `what` names the structure in messages ("GPHash table 'kv' in pool /dev/shm/p"). Throws
  // not_found ("<what> does not exist: create it first"), corrupt and version.
  pool_object open_object(std::string_view name, const format::object_kind& kind,
                          std::string_view what) const;
  void free(std::string_view name);          // crash-atomic
  std::vector<pool_object> objects() const;  // in offset order
  // Claims object `name` for `user` (what the error names, e.g. "a tx_heap"). Throws not_found,
  // busy when it is claimed already (open twice). free() of a claimed object throws busy.
  object_claim claim(std::string_view name, std::string_view user);

  // An application-defined root (offset and size of an object), persisted in the root record.
  void set_root(std::uint64_t offset, std::uint64_t bytes);
  std::pair<std::uint64_t, std::uint64_t> root() const;

  // Writes the pages changed since the last snapshot to the snapshot directory such that a power
  // loss at any moment leaves the previous or the new snapshot intact. Call it at a point where
  // no kernel is writing the pool.
  snapshot_result snapshot();

  pool_info info() const;
  gpm::durability durability() const;
  bool mapped_into_gpu() const;
  // Whether the previous writer closed the pool; false after a crash (run recovery).
  bool was_clean_shutdown() const;
  const std::string& path() const;
  std::uint64_t size() const;
  const std::vector<std::string>& notices() const;

  struct impl;

 private:
  explicit pool(std::unique_ptr<impl> impl);
  impl& live() const;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpm
