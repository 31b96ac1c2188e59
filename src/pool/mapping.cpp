// Pool backing (see mapping.hpp).
#include "mapping.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/detail/file_path.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/runtime.hpp>

#include "snapshot.hpp"

namespace gpm::detail {

namespace {

std::string sys_error(const std::string& what, const std::string& path, int err = errno) {
  return what + " " + path + ": " + std::strerror(err);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string parent_dir(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

// Whether a running process (this one included) holds a lock on the file open as `fd`: one of
// its descriptors of the file lists a lock in /proc/<pid>/fdinfo. Processes this one may not
// inspect are not seen.
bool lock_held_by_running_process(int fd) {
  struct stat mine {};
  if (fstat(fd, &mine) != 0) return false;
  const std::string self_fd = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& entry : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      struct stat st {};
      if (entry.path() == self_fd || ::stat(entry.path().c_str(), &st) != 0 ||
          st.st_dev != mine.st_dev || st.st_ino != mine.st_ino) {
        continue;
      }
      std::ifstream info(proc.path() / "fdinfo" / entry.path().filename());
      for (std::string line; std::getline(info, line);) {
        if (line.rfind("lock:", 0) == 0) return true;
      }
    }
  }
  return false;
}

// A process killed while its GPU context maps the pool can hold the pool's lock for a moment
// after it is reaped: the driver tears the context (and with it the mapping of the file) down
// asynchronously. Seen on an H100 right after a SIGKILL; so a conflict that no running process
// accounts for is retried this long. A running holder is reported at once.
constexpr auto kLockWait = std::chrono::seconds(3);

void lock_file(int fd, bool exclusive, const std::string& path) {
  struct flock fl {};
  fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;
  const auto give_up = std::chrono::steady_clock::now() + kLockWait;
  for (bool first = true;; first = false) {
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return;
    if (errno != EAGAIN && errno != EACCES) throw_error(errc::io, sys_error("cannot lock", path));
    if (first && lock_held_by_running_process(fd)) break;
    if (std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw_error(errc::busy, "pool " + path +
                              " is open for writing by another process (or another gpm::pool in "
                              "this one); close it there first");
}

std::uint64_t dax_device_bytes(const struct stat& st, const std::string& path) {
  const std::string sys = "/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
                          std::to_string(minor(st.st_rdev)) + "/size";
  std::ifstream in(sys);
  std::uint64_t bytes = 0;
  if (!(in >> bytes)) {
    throw_error(errc::unsupported, path + " is a character device but not a device-DAX node (" +
                                       sys + " is unreadable)");
  }
  return bytes;
}

// Refuses what cannot hold a pool before anything opens it: opening a FIFO blocks until a writer
// comes, a directory opens but cannot be mapped ("No such device"), and opening an arbitrary
// device may act on it. Character devices must be device-DAX nodes.
void refuse_special_file(const struct stat& st, const std::string& path) {
  if (S_ISCHR(st.st_mode)) {
    dax_device_bytes(st, path);
  } else if (!S_ISREG(st.st_mode)) {
    throw_error(errc::invalid_argument,
                path + " is " + file_type_name(st.st_mode) +
                    ", not a pool: a pool is a regular file (in a tmpfs directory) or a "
                    "device-DAX node");
  }
}

// Opens an existing pool file or device-DAX node with `flags` after refusing special files, and
// again after the open (the name may have been replaced in between; O_NONBLOCK keeps a FIFO
// swapped in from blocking the open itself).
int open_existing(const std::string& path, int flags) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw_error(errc::not_found, "pool " + path + " does not exist");
    throw_error(errc::io, sys_error("cannot examine", path));
  }
  refuse_special_file(st, path);
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) throw_error(errc::not_found, "pool " + path + " does not exist");
    throw_error(errc::io, sys_error("cannot open", path));
  }
  try {
    if (fstat(fd, &st) != 0) throw_error(errc::io, sys_error("cannot examine", path));
    refuse_special_file(st, path);
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
      throw_error(errc::io, sys_error("cannot open", path));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

char* map_shared(int fd, std::uint64_t bytes, bool writable, const std::string& path) {
  void* p = mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_error(errc::io, sys_error("cannot map", path));
  crash_image_mapped(p, bytes, fd);  // a crash-image checker may be waiting for this pool
  return static_cast<char*>(p);
}

}  // namespace

mapping::~mapping() {
  if (device != nullptr) cudaHostUnregister(host);
  if (kind == backing_kind::dax_device && host != nullptr) unregister_power_fail_range(host);
  if (host != nullptr) {
    crash_image_unmapped(host);
    munmap(host, bytes);
  }
  if (fd >= 0) ::close(fd);
}

pool_paths locate(const pool_options& o, const std::string& name) {
  pool_paths p;
  p.pm_dir = !o.pm_dir.empty() ? o.pm_dir : env_or("GPMKIT_PM_DIR", "/dev/shm/gpmkit");
  p.snapshot_root =
      !o.snapshot_dir.empty() ? o.snapshot_dir : env_or("GPMKIT_SNAPSHOT_DIR", "/var/tmp/gpmkit");
  require_no_nul(name, "pool path");
  require_no_nul(p.pm_dir, "pool_options::pm_dir");
  require_no_nul(p.snapshot_root, "pool_options::snapshot_dir");
  if (name.empty()) return p;
  p.pool = name.find('/') != std::string::npos ? name
                                               : (std::filesystem::path(p.pm_dir) / name).string();
  p.pool_absolute = absolute_path(p.pool);
  char key[24];
  std::snprintf(key, sizeof key, ".%016llx",
                static_cast<unsigned long long>(pool_path_hash(p.pool_absolute)));
  p.snapshot = (std::filesystem::path(p.snapshot_root) /
                (std::filesystem::path(p.pool).filename().string() + key + ".snapshot"))
                   .string();
  return p;
}

std::string nearest_existing(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) {
    p = p.parent_path();
  }
  return p.string();
}

backing_kind classify(const std::string& path, std::string* fs_name) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
    if (fs_name != nullptr) *fs_name = "device-DAX";
    return backing_kind::dax_device;
  }
  struct statfs fs {};
  const std::string probe = nearest_existing(path);
  if (statfs(probe.c_str(), &fs) != 0) {
    if (fs_name != nullptr) *fs_name = "unknown";
    return backing_kind::disk_file;
  }
  const auto type = static_cast<unsigned long>(fs.f_type);
  std::string name;
  backing_kind kind = backing_kind::disk_file;
  switch (type) {
    case TMPFS_MAGIC:
      name = "tmpfs";
      kind = backing_kind::shmem_file;
      break;
    case HUGETLBFS_MAGIC:
      name = "hugetlbfs";
      kind = backing_kind::shmem_file;
      break;
    case RAMFS_MAGIC:
      name = "ramfs";
      kind = backing_kind::shmem_file;
      break;
    case EXT4_SUPER_MAGIC: name = "ext4"; break;
    case XFS_SUPER_MAGIC: name = "xfs"; break;
    case BTRFS_SUPER_MAGIC: name = "btrfs"; break;
    case OVERLAYFS_SUPER_MAGIC: name = "overlayfs"; break;
    case NFS_SUPER_MAGIC: name = "nfs"; break;
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", type);
      name = std::string("file system type ") + buf;
    }
  }
  if (fs_name != nullptr) *fs_name = name;
  return kind;
}

bool huge_page_backed(const std::string& path) {
  // The mount holding `path` is the /proc/mounts entry with the longest matching mount point.
  std::ifstream mounts("/proc/mounts");
  const std::string target = nearest_existing(path);
  std::string device, point, type, options, best_type, best_options;
  std::size_t best = 0;
  std::string rest;
  while (mounts >> device >> point >> type >> options && std::getline(mounts, rest)) {
    const bool under = target == point || point == "/" || target.rfind(point + "/", 0) == 0;
    if (under && point.size() >= best) {
      best = point.size();
      best_type = type;
      best_options = "," + options + ",";
    }
  }
  return best_type == "hugetlbfs" ||
         (best_type == "tmpfs" && (best_options.find(",huge=always,") != std::string::npos ||
                                   best_options.find(",huge=within_size,") != std::string::npos));
}

void require_gpu_mappable_dir(const std::string& dir) {
  std::string fs;
  if (classify(dir, &fs) != backing_kind::disk_file) return;
  throw_error(errc::unsupported,
              "cannot put a GPU-mapped pool in " + dir + " (" + fs +
                  "): CUDA maps host memory into the GPU by pinning its pages, and Linux refuses "
                  "long-term pins of writable shared mappings of files on disk file systems. Put "
                  "the pool in a tmpfs directory (the default is /dev/shm/gpmkit; set "
                  "GPMKIT_PM_DIR or pool_options::pm_dir) or on a device-DAX node, and use "
                  "pool.snapshot() for durability on disk");
}

// A create killed before publish() leaves its temporary file, ".NAME.creating.PID", behind. The
// next create in the directory removes such files once their creator is gone: its process is not
// running, and nobody holds the file's lock (which also covers a PID reused since).
void remove_stale_creations(const std::string& dir) {
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.rfind(".creating.");
    if (name.empty() || name[0] != '.' || at == std::string::npos || at == 0) continue;
    const std::string digits = name.substr(at + 10);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;
    const int fd = ::open(e.path().c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fcntl(fd, F_OFD_SETLK, &fl) == 0) {
      ::unlink(e.path().c_str());
    }
    ::close(fd);
  }
}

std::unique_ptr<mapping> create_backing(const std::string& path, std::uint64_t bytes) {
  auto m = std::make_unique<mapping>();
  std::string fs;
  m->kind = classify(path, &fs);
  m->writable = true;
  m->bytes = bytes;
  if (m->kind == backing_kind::dax_device) {
    m->path = path;
    m->fd = open_existing(path, O_RDWR);
    struct stat st {};
    fstat(m->fd, &st);
    const std::uint64_t capacity = dax_device_bytes(st, path);
    if (bytes > capacity) {
      throw_error(errc::invalid_argument, "pool of " + std::to_string(bytes) +
                                              " bytes does not fit device " + path + " (" +
                                              std::to_string(capacity) + " bytes)");
    }
    lock_file(m->fd, true, path);
    m->host = map_shared(m->fd, bytes, true, path);
    register_power_fail_range(m->host, bytes);
    return m;
  }
  const std::string dir = parent_dir(path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_error(errc::io, "cannot create directory " + dir + ": " + ec.message());
  if (path_exists(path)) {
    throw_error(errc::already_exists, "pool " + path +
                                          " already exists; open it, or remove it "
                                          "first (gpmkit pool rm)");
  }
  remove_stale_creations(dir);
  // Built under a temporary name and renamed into place once initialised, so that a crash during
  // creation never leaves a half-made pool under the real name.
  m->path = dir + "/." + std::filesystem::path(path).filename().string() + ".creating." +
            std::to_string(getpid());
  m->fd = ::open(m->path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (m->fd < 0) throw_error(errc::io, sys_error("cannot create", m->path));
  lock_file(m->fd, true, path);
  if (const int err = posix_fallocate(m->fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::unlink(m->path.c_str());
    if (err == ENOSPC) {
      throw_error(errc::out_of_memory, "not enough space in " + dir + " (" + fs +
                                           ") for a pool of " + std::to_string(bytes) + " bytes");
    }
    throw_error(errc::io, sys_error("cannot reserve space for", path, err));
  }
  try {
    m->host = map_shared(m->fd, bytes, true, path);
  } catch (...) {
    ::unlink(m->path.c_str());
    throw;
  }
  return m;
}

void publish(mapping& m, const std::string& final_path) {
  if (m.kind == backing_kind::dax_device || m.path == final_path) return;
  if (renameat2(AT_FDCWD, m.path.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    ::unlink(m.path.c_str());
    if (err == EEXIST) {
      throw_error(errc::already_exists, "pool " + final_path + " was created concurrently");
    }
    throw_error(errc::io, sys_error("cannot rename into place", final_path, err));
  }
  m.path = final_path;
}

std::unique_ptr<mapping> lock_exclusively(const std::string& path) {
  auto m = std::make_unique<mapping>();
  m->path = path;
  m->fd = open_existing(path, O_RDWR);
  lock_file(m->fd, true, path);
  return m;
}

std::unique_ptr<mapping> open_backing(const std::string& path, bool writable) {
  auto m = std::make_unique<mapping>();
  m->path = path;
  m->writable = writable;
  m->kind = classify(path, nullptr);
  m->fd = open_existing(path, writable ? O_RDWR : O_RDONLY);
  lock_file(m->fd, writable, path);
  struct stat st {};
  if (fstat(m->fd, &st) != 0) throw_error(errc::io, sys_error("cannot stat", path));
  m->bytes = m->kind == backing_kind::dax_device ? dax_device_bytes(st, path)
                                                 : static_cast<std::uint64_t>(st.st_size);
  if (m->bytes == 0) throw_error(errc::corrupt, "pool " + path + " is empty (0 bytes)");
  m->host = map_shared(m->fd, m->bytes, writable, path);
  if (m->kind == backing_kind::dax_device) register_power_fail_range(m->host, m->bytes);
  return m;
}

bool file_shrank(const mapping& m) {
  struct stat st {};
  return m.kind != backing_kind::dax_device && fstat(m.fd, &st) == 0 &&
         static_cast<std::uint64_t>(st.st_size) < m.bytes;
}

void read_file(const mapping& m, std::uint64_t offset, void* out, std::uint64_t bytes) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(m.fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_error(errc::io, sys_error("cannot read", m.path));
    if (n == 0) {
      throw_error(errc::corrupt, "pool " + m.path + " ends at byte " + std::to_string(offset) +
                                     " although it was " + std::to_string(m.bytes) +
                                     " bytes when it was opened: another process truncated it");
    }
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

void map_into_gpu(mapping& m, gpu_mapping how,
                  const std::function<void(const std::string&)>& notice) {
  if (how == gpu_mapping::none) return;
  const device_info dev = query_device();
  if (!dev.present) {
    if (how == gpu_mapping::required) {
      throw_error(errc::no_device,
                  "pool " + m.path + " must be mapped into a GPU, but " + dev.absent_reason);
    }
    notice("no GPU (" + dev.absent_reason + "): pool " + m.path +
           " is mapped for host access only; build with the host backend to run kernels "
           "on the emulator");
    return;
  }
  const unsigned flags = cudaHostRegisterMapped | (m.writable ? 0u : cudaHostRegisterReadOnly);
  const cudaError_t e = cudaHostRegister(m.host, m.bytes, flags);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::string fs;
    classify(m.path, &fs);
    std::string why = std::string(cudaGetErrorName(e)) + ", " + cudaGetErrorString(e);
    if (m.kind == backing_kind::disk_file) {
      why += "; the pool is on " + fs +
             ", whose writable shared mappings Linux does not let "
             "a GPU pin: use a tmpfs directory such as /dev/shm/gpmkit";
    }
    if (how == gpu_mapping::required) {
      throw_error(errc::cuda, "cannot map pool " + m.path + " into the GPU (" + why + ")");
    }
    notice("pool " + m.path + " is mapped for host access only: cudaHostRegister failed (" + why +
           ")");
    return;
  }
  void* dev_ptr = nullptr;
  check_cuda(cudaHostGetDevicePointer(&dev_ptr, m.host, 0), "cudaHostGetDevicePointer");
  m.device = static_cast<char*>(dev_ptr);
}

}  // namespace gpm::detail
