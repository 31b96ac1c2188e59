// gpm::pool (see pool.hpp). Directory operations are made crash-atomic by the root record's
// pending operation: announce (root), act (entry), retire (root); recovery finishes or undoes an
// announced operation, so after a crash an object exists entirely or not at all and, because
// free space is derived from the directory, no space leaks.
//
// The protocol's persist sites (gpm::persist_at; docs/crash-checking.md names the test that
// catches the removal of each):
//   pool.create.header   the header and first root record of a new pool (layout.cpp)
//   pool.root.write      every root record update: announce, retire, open, close, set_root
//                        (layout.cpp)
//   pool.allocate.zero   a new object's bytes, zeroed
//   pool.allocate.entry  a new object's directory entry
//   pool.free.entry      a freed object's directory entry, cleared
//   pool.recover.entry   recovery clearing the entry of an interrupted operation
//   pool.restore.image   a pool file restored from its snapshot
#include <gpm/pool/pool.hpp>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>

#include <gpm/platform/checked_math.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/detail/file_path.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/format.hpp>
#include <gpm/pool/object_header.hpp>

#include "layout.hpp"
#include "mapping.hpp"
#include "snapshot.hpp"

namespace gpm {

namespace fmt = format::pool;
using detail::findings;

std::string_view to_string(durability d) noexcept {
  switch (d) {
    case durability::process_crash: return "process-crash";
    case durability::power_fail: return "power-fail";
  }
  return "unknown";
}

namespace detail {
// The objects claimed in this process, with who claimed them; shared with the claims, which may
// outlive the pool.
struct claim_set {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> users;  // name -> user
};
}  // namespace detail

object_claim::object_claim(std::shared_ptr<detail::claim_set> set, std::string name)
    : set_(std::move(set)), name_(std::move(name)) {}
object_claim::object_claim(object_claim&& other) noexcept
    : set_(std::move(other.set_)), name_(std::move(other.name_)) {}
object_claim& object_claim::operator=(object_claim&& other) noexcept {
  if (this != &other) {
    release();
    set_ = std::move(other.set_);
    name_ = std::move(other.name_);
  }
  return *this;
}
object_claim::~object_claim() { release(); }
void object_claim::release() noexcept {
  if (!set_) return;
  const std::lock_guard lock(set_->mutex);
  set_->users.erase(name_);
  set_.reset();
}

struct pool::impl {
  std::unique_ptr<detail::mapping> map;
  std::shared_ptr<detail::claim_set> claims = std::make_shared<detail::claim_set>();
  pool_options options;
  std::string path;  // the name the pool was opened by, resolved
  detail::root_state root{};
  bool was_clean = true;
  std::vector<std::string> notices;
  std::unique_ptr<detail::snapshot_fs> fs;
  std::unique_ptr<detail::snapshot_store> snapshots;
  mutable std::mutex mutex;

  char* base() const { return map->host; }
  const fmt::header& header() const { return detail::header_of(map->host); }
  fmt::directory_entry* entries() const { return detail::entries_of(map->host); }

  void notice(const std::string& text) {
    notices.push_back(text);
    if (options.notice) {
      options.notice(text);
    } else {
      std::fprintf(stderr, "gpmkit: %s\n", text.c_str());
    }
  }

  void update_root(const std::function<void(fmt::root_record&)>& change) {
    fmt::root_record next = root.record;
    change(next);
    detail::write_root(base(), root, next);
  }

  std::optional<std::uint32_t> index_of(std::string_view name) const {
    const fmt::directory_entry* e = entries();
    for (std::uint32_t i = 0; i < header().directory_capacity; ++i) {
      if (!detail::entry_is_zero(e[i]) && std::string_view(e[i].name) == name) return i;
    }
    return std::nullopt;
  }

  // Live extents in offset order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> extents() const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    const fmt::directory_entry* e = entries();
    for (std::uint32_t i = 0; i < header().directory_capacity; ++i) {
      if (!detail::entry_is_zero(e[i])) out.emplace_back(e[i].offset, e[i].offset + e[i].extent);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::uint64_t free_bytes() const {
    std::uint64_t used = 0;
    for (auto [b, e] : extents()) used += e - b;
    return header().heap_bytes - used;
  }

  // Finishes or undoes the directory operation a crash interrupted (check_root has vetted its
  // entry index).
  void finish_pending(findings& f) {
    const fmt::root_record& r = root.record;
    if (r.pending == fmt::op_none) return;
    fmt::directory_entry& e = entries()[r.pending_entry];
    const bool live = e.state == fmt::kEntryLive && e.checksum == detail::entry_checksum(e);
    std::string what;
    if (r.pending == fmt::op_allocate && live) {
      what = "allocation of \"" + std::string(e.name) + "\" completed before the crash";
    } else {
      what = r.pending == fmt::op_allocate ? "an allocation interrupted by a crash was undone"
                                           : "a free interrupted by a crash was completed";
      std::memset(&e, 0, sizeof e);
      persist_at("pool.recover.entry", &e, sizeof e);
    }
    crash_point("pool.recover.fixed");
    update_root([](fmt::root_record& n) {
      n.pending = fmt::op_none;
      n.pending_entry = 0;
    });
    f.notes.push_back("recovered the pool directory: " + what);
  }

  pool_object object_at(std::uint32_t i) const {
    const fmt::directory_entry& e = entries()[i];
    return pool_object{e.name, e.offset, e.bytes, e.alignment, e.type_tag};
  }

  detail::snapshot_store& snapshot_store() {
    if (!snapshots) {
      fs = detail::make_posix_fs();
      const detail::pool_paths where = detail::locate(options, path);
      snapshots =
          std::make_unique<detail::snapshot_store>(*fs, where.snapshot, where.pool_absolute);
    }
    return *snapshots;
  }

  void mark_clean_and_release() {
    // A pool truncated under us stays marked unclean: writing its root record would fault.
    if (map && map->writable && !detail::file_shrank(*map)) {
      update_root([](fmt::root_record& n) { n.flags |= fmt::kFlagCleanShutdown; });
    }
    map.reset();
  }
};

namespace {

void default_notice(pool_options& o) {
  if (!o.notice) {
    o.notice = [](const std::string& text) { std::fprintf(stderr, "gpmkit: %s\n", text.c_str()); };
  }
}

void validate_name(std::string_view name) {
  require(!name.empty(), "object name is empty");
  if (name.size() > fmt::kNameMax) {
    throw_error(errc::invalid_argument, "object name \"" + std::string(name) + "\" is " +
                                            std::to_string(name.size()) + " bytes; at most " +
                                            std::to_string(fmt::kNameMax) + " are allowed");
  }
  require(name.find('\0') == std::string_view::npos, "object name contains a NUL byte");
}

// Opens and validates the pool file; returns findings instead of throwing on format problems.
std::unique_ptr<pool::impl> open_validated(const std::string& path, std::string_view layout,
                                           const pool_options& o, bool writable, findings& f) {
  auto p = std::make_unique<pool::impl>();
  p->options = o;
  p->path = path;
  p->map = detail::open_backing(path, writable);
  if (!detail::check_header(p->base(), p->map->bytes, layout, f)) return p;
  std::optional<detail::root_state> root = detail::read_root(p->base(), f);
  if (!root) return p;
  p->root = *root;
  detail::check_root(p->header(), root->record, f);
  if (!f.ok()) return p;
  if (writable) {
    p->finish_pending(f);
  } else if (root->record.pending != fmt::op_none) {
    f.notes.push_back(
        "a directory operation was interrupted by a crash; opening the pool for "
        "writing will finish it");
  }
  if (f.ok()) detail::check_directory(p->base(), p->header(), p->root.record, f);
  return p;
}

// Before snapshot manifest 3.0, a snapshot directory was named after the pool's file name alone
// (<snapshot dir>/<name>.snapshot), so it may belong to a pool of that name in another directory;
// it is never used, but a user looking for a pool's snapshot should hear of it.
std::string older_snapshot_hint(const std::string& path, const pool_options& o) {
  const std::string old = detail::locate(o).snapshot_root + "/" +
                          std::filesystem::path(path).filename().string() + ".snapshot";
  std::error_code ec;
  if (!std::filesystem::exists(old + "/manifest", ec)) return "";
  return " (" + old +
         " holds a snapshot written by an older gpmkit, which named snapshots after the pool's "
         "file name alone, so it is not used: restore it with the gpmkit release that wrote it)";
}

using uuid_bytes = std::array<std::uint8_t, 16>;

// The uuid in the header of the pool file open as `fd` when the header's checksum vouches for it
// (the rest of the pool may be damaged); nothing when the header itself is not sound.
std::optional<uuid_bytes> trusted_uuid(int fd) {
  std::vector<char> page(fmt::kPageBytes);
  if (::pread(fd, page.data(), page.size(), 0) != static_cast<ssize_t>(page.size())) return {};
  const fmt::header& h = detail::header_of(page.data());
  if (std::memcmp(h.common.magic, fmt::kKind.magic, sizeof h.common.magic) != 0 ||
      h.common.header_bytes != fmt::kPageBytes ||
      h.common.checksum != format::header_checksum(page.data(), fmt::kPageBytes)) {
    return {};
  }
  uuid_bytes u;
  std::memcpy(u.data(), h.common.uuid, u.size());
  return u;
}

// Recreates the pool file at `path` from its snapshot; returns the restore result. `replacing`:
// the uuid of the pool the restore replaces, when known; a snapshot of another pool is refused.
snapshot_result restore_file(const std::string& path, const pool_options& o,
                             const std::optional<uuid_bytes>& replacing = {}) {
  const detail::pool_paths where = detail::locate(o, path);
  const detail::snapshot_lock lock(where.snapshot, false);
  auto fs = detail::make_posix_fs();
  detail::snapshot_store store(*fs, where.snapshot, where.pool_absolute);
  const std::optional<detail::snapshot_manifest> m = store.manifest();
  if (!m) {
    throw_error(errc::not_found, "no snapshot of pool " + path + " in " + store.dir() +
                                     older_snapshot_hint(path, o));
  }
  if (replacing && std::memcmp(replacing->data(), m->uuid, replacing->size()) != 0) {
    std::uint8_t now[16];
    std::memcpy(now, replacing->data(), sizeof now);
    throw_error(errc::already_exists,
                "the snapshot in " + store.dir() + " is of another pool (uuid " +
                    format::uuid_string(m->uuid) + ") than the one at " + path + " (uuid " +
                    format::uuid_string(now) +
                    "): restoring it would replace that pool with another; remove the pool "
                    "first (gpmkit pool rm) if that is what you want");
  }
  auto map = detail::create_backing(path, m->pool_bytes);
  try {
    // The image was taken from an open pool, so it says "not cleanly closed" and modules run
    // their recovery on it, exactly as after a crash.
    const snapshot_result r = store.restore_into(map->host);
    persist_at("pool.restore.image", map->host, m->pool_bytes);
    detail::publish(*map, path);
    return r;
  } catch (...) {
    ::unlink(map->path.c_str());  // the unpublished temporary file
    throw;
  }
}

// Throws unless the file `m` holds starts with the pool magic: what gpmkit deletes or replaces
// must be a pool (of any version, damaged or not), never a file that merely has its name.
void require_pool_magic(const detail::mapping& m, const std::string& path, const char* instead) {
  char magic[sizeof fmt::kKind.magic] = {};
  const ssize_t n = ::pread(m.fd, magic, sizeof magic, 0);
  if (n != static_cast<ssize_t>(sizeof magic) ||
      std::memcmp(magic, fmt::kKind.magic, sizeof magic) != 0) {
    throw_error(errc::invalid_argument,
                path +
                    " is not a gpmkit pool (it does not start with the pool magic \"GPMKPOOL\"): " +
                    instead);
  }
}

// Refuses a path whose name is not itself a file gpmkit may delete or replace: a symbolic link
// (the pool it names has a name of its own) or a device-DAX node (no file to remove).
void require_pool_file_name(const std::string& path, const char* doing) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // missing: the caller reports it
  if (S_ISLNK(st.st_mode)) {
    throw_error(errc::invalid_argument, path + " is a symbolic link: gpmkit does not " + doing +
                                            " through links; name the pool file itself");
  }
  if (S_ISCHR(st.st_mode)) {
    throw_error(errc::unsupported, path + " is a device node: gpmkit does not " + doing +
                                       " device nodes (a pool on device-DAX is erased by "
                                       "creating a new one over it)");
  }
}

bool snapshot_exists(const std::string& path, const pool_options& o) {
  return detail::path_exists(detail::locate(o, path).snapshot + "/manifest");
}

}  // namespace

pool::pool(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
pool::pool(pool&&) noexcept = default;
pool& pool::operator=(pool&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->mark_clean_and_release();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
pool::~pool() {
  if (impl_) {
    try {
      impl_->mark_clean_and_release();
    } catch (...) {
      // A destructor must not throw; the pool simply stays marked as not cleanly closed.
    }
  }
}

std::string pool::resolve(const std::string& path, const pool_options& options) {
  require(!path.empty(), "pool path is empty");
  return detail::locate(options, path).pool;
}

std::string pool::pm_directory(const pool_options& options) {
  return detail::locate(options).pm_dir;
}

std::string pool::snapshot_directory(const pool_options& options) {
  return detail::locate(options).snapshot_root;
}

std::string pool::snapshot_location(const std::string& path, const pool_options& options) {
  require(!path.empty(), "pool path is empty");
  return detail::locate(options, path).snapshot;
}

void pool::require_gpu_mappable(const std::string& path_in, const pool_options& options) {
  const std::string path = resolve(path_in, options);
  if (detail::classify(path, nullptr) == detail::backing_kind::dax_device) return;
  detail::require_gpu_mappable_dir(std::filesystem::path(path).parent_path().string());
}

storage_info describe_storage(const std::string& path) {
  storage_info s;
  s.probe_path = detail::nearest_existing(path);
  const detail::backing_kind kind = detail::classify(path, &s.file_system);
  s.gpu_mappable = kind != detail::backing_kind::disk_file;
  s.huge_pages = detail::huge_page_backed(s.probe_path);
  s.pool_durability =
      kind == detail::backing_kind::dax_device ? durability::power_fail : durability::process_crash;
  struct statvfs st {};
  if (statvfs(s.probe_path.c_str(), &st) == 0) {
    s.free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    s.total_bytes = static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  }
  return s;
}

pool pool::create(const std::string& path_in, std::uint64_t bytes, std::string_view layout,
                  pool_options options) {
  default_notice(options);
  const std::string path = resolve(path_in, options);
  require(!layout.empty(), "layout name is empty");
  if (layout.size() > fmt::kLayoutMax) {
    throw_error(errc::invalid_argument, "layout name is " + std::to_string(layout.size()) +
                                            " bytes; at most " + std::to_string(fmt::kLayoutMax) +
                                            " are allowed");
  }
  require(options.directory_capacity > 0, "directory capacity must be at least 1");
  if (bytes % fmt::kPageBytes != 0) {
    throw_error(errc::invalid_argument, "pool size " + std::to_string(bytes) +
                                            " is not a multiple of the page size (4096 bytes)");
  }
  const std::uint64_t minimum = detail::minimum_pool_bytes(options.directory_capacity);
  if (bytes < minimum) {
    throw_error(errc::invalid_argument, "pool size " + std::to_string(bytes) + " is below the " +
                                            std::to_string(minimum) + " bytes a pool with " +
                                            std::to_string(options.directory_capacity) +
                                            " directory entries needs");
  }
  require(!options.read_only, "cannot create a pool read-only");
  if (detail::classify(path, nullptr) != detail::backing_kind::dax_device) {
    if (options.gpu != gpu_mapping::none) require_gpu_mappable(path, options);
    if (snapshot_exists(path, options)) {
      throw_error(errc::already_exists,
                  "a snapshot of a pool named " + std::filesystem::path(path).filename().string() +
                      " exists in " + detail::locate(options, path).snapshot +
                      ": open the pool to restore it, or remove the snapshot first (gpmkit pool "
                      "rm --snapshot)");
    }
  }
  auto p = std::make_unique<impl>();
  p->options = options;
  p->path = path;
  p->map = detail::create_backing(path, bytes);
  detail::format_pool(p->base(), bytes, layout, options.directory_capacity);
  findings f;
  p->root = *detail::read_root(p->base(), f);
  detail::publish(*p->map, path);
  p->update_root([](fmt::root_record& n) {
    n.flags &= ~fmt::kFlagCleanShutdown;
    n.open_count += 1;
  });
  detail::map_into_gpu(*p->map, options.gpu, [&](const std::string& t) { p->notice(t); });
  return pool(std::move(p));
}

pool pool::open(const std::string& path_in, std::string_view layout, pool_options options) {
  default_notice(options);
  const std::string path = resolve(path_in, options);
  require(!layout.empty(), "layout name is empty");
  const bool writable = !options.read_only;
  std::vector<std::string> early_notes;

  const bool file_missing = detail::classify(path, nullptr) != detail::backing_kind::dax_device &&
                            !detail::path_exists(path);
  if (file_missing) {
    if (!writable || !options.restore_from_snapshot || !snapshot_exists(path, options)) {
      throw_error(errc::not_found,
                  "pool " + path + " does not exist" +
                      (snapshot_exists(path, options)
                           ? std::string(" (a snapshot exists; open it writable to restore it)")
                           : std::string(" and has no snapshot in ") +
                                 detail::locate(options, path).snapshot +
                                 older_snapshot_hint(path, options)));
    }
    const snapshot_result r = restore_file(path, options);
    early_notes.push_back("pool " + path + " was missing (after a reboot?): restored snapshot " +
                          std::to_string(r.seq) + " from " +
                          detail::locate(options, path).snapshot);
  }

  findings f;
  std::unique_ptr<impl> p;
  try {
    p = open_validated(path, layout, options, writable, f);
  } catch (const error& e) {
    if (e.code() != errc::corrupt) throw;
    f.add(errc::corrupt, e.what());
  }
  const bool repairable =
      f.problems.empty() || std::all_of(f.problems.begin(), f.problems.end(),
                                        [](const auto& pr) { return pr.code == errc::corrupt; });
  if (!f.ok() && writable && repairable && options.restore_from_snapshot &&
      snapshot_exists(path, options)) {
    // Only the pool's own snapshot may replace it: when its header still names its uuid, the
    // snapshot must carry the same one (restore_file checks before it changes anything).
    const std::optional<uuid_bytes> uuid = p && p->map ? trusted_uuid(p->map->fd) : std::nullopt;
    // Keep the damaged file for inspection; nothing is deleted.
    const std::string aside = path + ".corrupt." + std::to_string(std::time(nullptr));
    p.reset();
    detail::rename_path(path, aside);
    snapshot_result r;
    try {
      r = restore_file(path, options, uuid);
    } catch (const error& e) {
      // The damaged pool stays where it was, and the error says both what is wrong with it and
      // why its snapshot could not replace it.
      detail::rename_path(aside, path);
      f.add(e.code(), std::string("it was not restored from its snapshot: ") + e.what());
      f.raise(path);
    }
    early_notes.push_back("pool " + path + " was corrupt (" + f.problems.front().text +
                          "): moved it to " + aside + " and restored snapshot " +
                          std::to_string(r.seq));
    f = findings{};
    p = open_validated(path, layout, options, writable, f);
  }
  if (!f.ok()) f.raise(path);

  for (const std::string& n : early_notes) p->notice(n);
  for (const std::string& n : f.notes) p->notice(n);
  p->was_clean = (p->root.record.flags & fmt::kFlagCleanShutdown) != 0;
  if (writable) {
    p->update_root([](fmt::root_record& n) {
      n.flags &= ~fmt::kFlagCleanShutdown;
      n.open_count += 1;
      n.last_open_ns =
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
    });
  }
  detail::map_into_gpu(*p->map, options.gpu, [&](const std::string& t) { p->notice(t); });
  return pool(std::move(p));
}

pool_check pool::check(const std::string& path_in, pool_options options) {
  const std::string path = resolve(path_in, options);
  pool_check result;
  findings f;
  std::unique_ptr<impl> p;
  try {
    options.gpu = gpu_mapping::none;
    p = open_validated(path, "", options, false, f);
  } catch (const error& e) {
    result.failure = e.code();
    result.problems.push_back(e.what());
    return result;
  }
  for (const auto& pr : f.problems) result.problems.push_back(pr.text);
  if (!f.ok() && f.problems.front().code == errc::version) {
    // Another format version is not read at all, so the pool is not found inconsistent: this
    // gpmkit could not examine it (and says which version it is and which it reads).
    result.failure = errc::version;
    result.problems = {"pool " + path + ": " + f.problems.front().text};
  }
  result.notes = f.notes;
  if (f.ok()) {
    pool q(std::move(p));
    result.info = q.info();
    result.ok = true;
  }
  return result;
}

void pool::remove(const std::string& path_in, pool_options options, bool with_snapshot) {
  const std::string path = resolve(path_in, options);
  require_pool_file_name(path, "remove");
  std::unique_ptr<detail::mapping> held;
  if (detail::path_exists(path)) {
    // Taking the write lock proves no one has the pool open; it is held until the file is gone.
    held = detail::lock_exclusively(path);
    require_pool_magic(*held, path,
                       "gpmkit removes pools only; delete it yourself if that is what you want");
  } else if (!with_snapshot || !snapshot_exists(path, options)) {
    throw_error(errc::not_found, "pool " + path + " does not exist");
  }
  // The snapshot first: if it is refused (a foreign file in its directory), nothing is removed.
  if (with_snapshot) detail::remove_snapshot(detail::locate(options, path).snapshot);
  if (held && ::unlink(path.c_str()) != 0) {
    throw_error(errc::io, "cannot remove " + path + ": " + std::strerror(errno));
  }
}

snapshot_result pool::restore(const std::string& path_in, pool_options options) {
  const std::string path = resolve(path_in, options);
  require_pool_file_name(path, "replace");
  if (detail::path_exists(path)) {
    auto m = detail::lock_exclusively(path);  // fails if the pool is open
    require_pool_magic(*m, path, "restoring would replace it; move it away first");
    const std::optional<uuid_bytes> uuid = trusted_uuid(m->fd);
    const std::string aside = path + ".replaced." + std::to_string(std::time(nullptr));
    detail::rename_path(path, aside);
    try {
      const snapshot_result r = restore_file(path, options, uuid);
      std::error_code ec;
      std::filesystem::remove(aside, ec);  // the pool is restored; the old file may stay beside it
      return r;
    } catch (...) {
      detail::rename_path(aside, path);
      throw;
    }
  }
  return restore_file(path, options);
}

pool::impl& pool::live() const {
  if (!impl_) throw_error(errc::invalid_argument, "the pool is closed");
  return *impl_;
}

void pool::close() {
  if (impl_) {
    impl_->mark_clean_and_release();
    impl_.reset();
  }
}

pool_ref pool::ref() const {
  const impl& p = live();
  if (p.map->device == nullptr) {
    throw_error(errc::no_device,
                "pool " + p.path + " is not mapped into a GPU (" +
                    (p.notices.empty() ? std::string("gpu mapping disabled") : p.notices.back()) +
                    ")");
  }
  return pool_ref{p.map->device, p.map->bytes};
}

pool_ref pool::host_ref() const {
  const impl& p = live();
  return pool_ref{p.map->host, p.map->bytes};
}

std::uint64_t pool::allocate(std::string_view name, std::uint64_t bytes, std::uint64_t alignment,
                             std::uint64_t type_tag) {
  impl& p = live();
  validate_name(name);
  require(bytes > 0, "cannot allocate an object of 0 bytes");
  require(alignment >= fmt::kMinAlignment && (alignment & (alignment - 1)) == 0 &&
              alignment <= (1ull << 30),
          "alignment must be a power of two from 128 bytes to 1 GiB");
  require(p.map->writable, "the pool is open read-only");
  std::lock_guard lock(p.mutex);
  if (p.index_of(name)) {
    throw_error(errc::already_exists,
                "pool " + p.path + " already holds an object named \"" + std::string(name) + "\"");
  }
  const fmt::header& h = p.header();
  std::optional<std::uint32_t> slot;
  for (std::uint32_t i = 0; i < h.directory_capacity && !slot; ++i) {
    if (detail::entry_is_zero(p.entries()[i])) slot = i;
  }
  if (!slot) {
    throw_error(errc::out_of_memory, "pool " + p.path + " holds " +
                                         std::to_string(h.directory_capacity) +
                                         " named objects, its directory's capacity");
  }
  // An object larger than the heap can never fit; refusing it first also keeps the rounding
  // below from wrapping around (2^64 - 1 bytes used to round to 0 and "fit" anywhere).
  const std::optional<std::uint64_t> rounded =
      bytes <= h.heap_bytes ? checked_round_up(bytes, alignment) : std::nullopt;
  if (!rounded || *rounded > h.heap_bytes) {
    throw_error(errc::out_of_memory, "pool " + p.path + " cannot hold \"" + std::string(name) +
                                         "\" of " + std::to_string(bytes) + " bytes: its heap is " +
                                         std::to_string(h.heap_bytes) + " bytes in all");
  }
  const std::uint64_t extent = *rounded;
  std::optional<std::uint64_t> where;
  std::uint64_t cursor = h.heap_offset;
  std::uint64_t largest = 0;
  auto consider = [&](std::uint64_t gap_end) {
    const std::uint64_t start = (cursor + alignment - 1) / alignment * alignment;
    if (start <= gap_end) largest = std::max(largest, gap_end - start);
    if (!where && start <= gap_end && gap_end - start >= extent) where = start;
  };
  for (auto [b, e] : p.extents()) {
    consider(b);
    cursor = std::max(cursor, e);
  }
  consider(h.common.object_bytes);
  if (!where) {
    throw_error(errc::out_of_memory,
                "pool " + p.path + " is full: no free extent of " + std::to_string(extent) +
                    " bytes aligned to " + std::to_string(alignment) + " for \"" +
                    std::string(name) + "\" (largest free extent " + std::to_string(largest) +
                    " bytes, " + std::to_string(p.free_bytes()) + " bytes free in all)");
  }

  // Announce, act, retire.
  p.update_root([&](fmt::root_record& n) {
    n.pending = fmt::op_allocate;
    n.pending_entry = *slot;
  });
  crash_point("pool.allocate.announced");
  std::memset(p.base() + *where, 0, extent);
  persist_at("pool.allocate.zero", p.base() + *where, extent);
  fmt::directory_entry e{};
  std::memcpy(e.name, name.data(), name.size());
  e.offset = *where;
  e.bytes = bytes;
  e.extent = extent;
  e.alignment = alignment;
  e.generation = p.root.record.seq;
  e.state = fmt::kEntryLive;
  e.type_tag = type_tag;
  e.checksum = detail::entry_checksum(e);
  fmt::directory_entry& dst = p.entries()[*slot];
  std::memcpy(&dst, &e, offsetof(fmt::directory_entry, checksum));
  crash_point("pool.allocate.entry_torn");
  dst.checksum = e.checksum;
  persist_at("pool.allocate.entry", &dst, sizeof dst);
  crash_point("pool.allocate.entry_written");
  p.update_root([](fmt::root_record& n) {
    n.pending = fmt::op_none;
    n.pending_entry = 0;
  });
  return *where;
}

std::optional<pool_object> pool::find(std::string_view name) const {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  const std::optional<std::uint32_t> i = p.index_of(name);
  if (!i) return std::nullopt;
  return p.object_at(*i);
}

pool_object pool::get(std::string_view name) const {
  std::optional<pool_object> o = find(name);
  if (!o) {
    throw_error(errc::not_found,
                "pool " + live().path + " holds no object named \"" + std::string(name) + "\"");
  }
  return *o;
}

pool_object pool::open_object(std::string_view name, const format::object_kind& kind,
                              std::string_view what) const {
  const std::optional<pool_object> o = find(name);
  if (!o) {
    throw_error(errc::not_found, std::string(what) + " does not exist (no object named '" +
                                     std::string(name) + "'): create it first");
  }
  format::validate_header(host_ptr<char>(o->offset), o->bytes, kind, what);
  return *o;
}

object_claim pool::claim(std::string_view name, std::string_view user) {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  if (!p.index_of(name)) {
    throw_error(errc::not_found,
                "pool " + p.path + " holds no object named \"" + std::string(name) + "\"");
  }
  const std::lock_guard claims_lock(p.claims->mutex);
  const auto [at, fresh] = p.claims->users.try_emplace(std::string(name), std::string(user));
  if (!fresh) {
    throw_error(errc::busy, "object \"" + std::string(name) + "\" of pool " + p.path +
                                " is open already in this process as " + at->second +
                                ": use that handle, or destroy it before opening another");
  }
  return object_claim(p.claims, std::string(name));
}

void pool::free(std::string_view name) {
  impl& p = live();
  require(p.map->writable, "the pool is open read-only");
  std::lock_guard lock(p.mutex);
  const std::optional<std::uint32_t> i = p.index_of(name);
  if (!i) {
    throw_error(errc::not_found,
                "pool " + p.path + " holds no object named \"" + std::string(name) + "\"");
  }
  {
    const std::lock_guard claims_lock(p.claims->mutex);
    const auto at = p.claims->users.find(name);
    if (at != p.claims->users.end()) {
      throw_error(errc::busy, "object \"" + std::string(name) + "\" of pool " + p.path +
                                  " is open in this process as " + at->second +
                                  ": destroy that handle before freeing it");
    }
  }
  p.update_root([&](fmt::root_record& n) {
    n.pending = fmt::op_free;
    n.pending_entry = *i;
  });
  crash_point("pool.free.announced");
  fmt::directory_entry& e = p.entries()[*i];
  std::memset(&e, 0, sizeof e);
  persist_at("pool.free.entry", &e, sizeof e);
  crash_point("pool.free.entry_cleared");
  p.update_root([](fmt::root_record& n) {
    n.pending = fmt::op_none;
    n.pending_entry = 0;
  });
}

std::vector<pool_object> pool::objects() const {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  std::vector<pool_object> out;
  for (std::uint32_t i = 0; i < p.header().directory_capacity; ++i) {
    if (!detail::entry_is_zero(p.entries()[i])) out.push_back(p.object_at(i));
  }
  std::sort(out.begin(), out.end(),
            [](const pool_object& a, const pool_object& b) { return a.offset < b.offset; });
  return out;
}

void pool::set_root(std::uint64_t offset, std::uint64_t bytes) {
  impl& p = live();
  require(p.map->writable, "the pool is open read-only");
  require(offset <= p.map->bytes && bytes <= p.map->bytes - offset,
          "the root lies outside the pool");
  std::lock_guard lock(p.mutex);
  p.update_root([&](fmt::root_record& n) {
    n.user_root_offset = offset;
    n.user_root_bytes = bytes;
  });
}

std::pair<std::uint64_t, std::uint64_t> pool::root() const {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  return {p.root.record.user_root_offset, p.root.record.user_root_bytes};
}

snapshot_result pool::snapshot() {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  if (p.map->kind == detail::backing_kind::dax_device) {
    throw_error(errc::unsupported, "pool " + p.path +
                                       " is on device-DAX and already power-fail "
                                       "durable; it takes no snapshots");
  }
  // The snapshot records the pool as "not cleanly closed", so a restored pool runs recovery.
  // Nothing about the snapshot is written into the pool: the manifest is the one record of it.
  const detail::snapshot_lock dir_lock(p.snapshot_store().dir(), true);
  const detail::mapping& m = *p.map;
  if (detail::file_shrank(m)) {
    throw_error(errc::corrupt, "pool " + p.path +
                                   " is shorter than when it was opened (another process "
                                   "truncated it): no snapshot was taken");
  }
  return p.snapshot_store().take(
      [&m](std::uint64_t offset, void* out, std::uint64_t bytes) {
        detail::read_file(m, offset, out, bytes);
      },
      m.bytes);
}

pool_info pool::info() const {
  impl& p = live();
  std::lock_guard lock(p.mutex);
  const fmt::header& h = p.header();
  pool_info i;
  i.path = p.path;
  i.layout = h.layout;
  i.uuid = format::uuid_string(h.common.uuid);
  i.major = h.common.major;
  i.minor = h.common.minor;
  i.bytes = h.common.object_bytes;
  i.heap_bytes = h.heap_bytes;
  i.free_bytes = p.free_bytes();
  i.created_ns = h.common.created_ns;
  i.directory_capacity = h.directory_capacity;
  for (std::uint32_t k = 0; k < h.directory_capacity; ++k) {
    if (!detail::entry_is_zero(p.entries()[k])) ++i.objects;
  }
  i.root_seq = p.root.record.seq;
  i.open_count = p.root.record.open_count;
  try {
    const auto m = p.snapshot_store().manifest();
    i.last_snapshot_seq = m ? m->seq : 0;
  } catch (const error&) {
    i.last_snapshot_seq = 0;  // a damaged snapshot is reported when it is used
  }
  i.clean_shutdown = (p.root.record.flags & fmt::kFlagCleanShutdown) != 0;
  return i;
}

gpm::durability pool::durability() const {
  return live().map->kind == detail::backing_kind::dax_device ? durability::power_fail
                                                              : durability::process_crash;
}

bool pool::mapped_into_gpu() const { return live().map->device != nullptr; }
bool pool::was_clean_shutdown() const { return live().was_clean; }
const std::string& pool::path() const { return live().path; }
std::uint64_t pool::size() const { return live().map->bytes; }
const std::vector<std::string>& pool::notices() const { return live().notices; }

}  // namespace gpm
