// `gpmkit info`: what this machine offers gpmkit (backend, GPU, host registration probed live,
// HMM, atomics, the PM and snapshot directories, durability levels). It creates nothing but two
// small probe files, which it removes, and never changes a pool.
#include "system_info.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <gpm/config.hpp>
#include <gpm/platform/runtime.hpp>

#include "command.hpp"
// The pool's own rules for directories and file systems, so that `info` can never disagree with
// what pool::create does (src/pool/mapping.hpp).

namespace gpmkit {

namespace fs = std::filesystem;

std::string pm_dir(const gpm::pool_options& options) { return gpm::pool::pm_directory(options); }

std::string snapshot_dir(const gpm::pool_options& options) {
  return gpm::pool::snapshot_directory(options);
}

directory_facts describe_directory(const std::string& path) {
  directory_facts d;
  d.path = path;
  std::error_code ec;
  d.exists = fs::is_directory(path, ec);
  d.storage = gpm::describe_storage(path);
  return d;
}

json::object to_json(const directory_facts& d) {
  json::object o;
  o.add("path", d.path);
  o.add("exists", d.exists);
  o.add("file_system", d.storage.file_system);
  o.add("huge_pages", d.storage.huge_pages);
  o.add("free_bytes", d.storage.free_bytes);
  o.add("total_bytes", d.storage.total_bytes);
  return o;
}

namespace {

std::string source_of(const std::string& option, const char* env) {
  if (!option.empty()) return "command line";
  const char* v = std::getenv(env);
  if (v != nullptr && *v != '\0') return std::string("$") + env;
  return "default";
}

json::value device_json(const gpm::device_info& dev) {
  json::object o;
  o.add("present", dev.present);
  o.add("emulated", dev.emulated);
  if (!dev.present) {
    o.add("absent_reason", dev.absent_reason);
    return o;
  }
  o.add("name", dev.name);
  o.add("compute_capability",
        std::to_string(dev.compute_major) + "." + std::to_string(dev.compute_minor));
  o.add("multiprocessors", dev.multiprocessors);
  o.add("global_memory_bytes", static_cast<std::uint64_t>(dev.global_memory));
  if (!dev.emulated) {
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", dev.pci_domain, dev.pci_bus, dev.pci_device);
    o.add("pci_bus_id", bus);
  }
  o.add("pcie_generation", dev.pcie_generation > 0 ? json::value(dev.pcie_generation) : nullptr);
  o.add("pcie_width", dev.pcie_width > 0 ? json::value(dev.pcie_width) : nullptr);
  o.add("can_map_host_memory", dev.can_map_host_memory);
  o.add("pageable_memory_access", dev.pageable_memory_access);
  o.add("host_native_atomics", dev.host_native_atomics);
  o.add("concurrent_managed_access", dev.concurrent_managed_access);
  return o;
}

// Closes, unmaps and removes a probe file however the probe ends.
struct probe_file {
  std::string path;
  int fd = -1;
  void* map = MAP_FAILED;
  std::size_t bytes = 0;
  ~probe_file() {
    if (map != MAP_FAILED) munmap(map, bytes);
    if (fd >= 0) ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Maps a small file in `dir` MAP_SHARED writable, as a pool is mapped, and asks CUDA to register
// it for GPU access: what pool::create's file-system rule predicts, checked on this machine.
json::object probe_registration(const directory_facts& dir) {
  constexpr std::size_t kProbeBytes = 64 * 1024;
  json::object o;
  o.add("directory", dir.storage.probe_path);
  o.add("file_system", dir.storage.file_system);
  probe_file f;
  f.bytes = kProbeBytes;
  std::string name = dir.storage.probe_path + "/.gpmkit-probe-XXXXXX";
  f.fd = mkstemp(name.data());
  if (f.fd < 0) {
    o.add("result", "not probed");
    o.add("reason",
          "cannot create a file in " + dir.storage.probe_path + ": " + std::strerror(errno));
    return o;
  }
  f.path = name;
  if (ftruncate(f.fd, kProbeBytes) != 0 ||
      (f.map = mmap(nullptr, kProbeBytes, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0)) ==
          MAP_FAILED) {
    o.add("result", "not probed");
    o.add("reason", "cannot map a file in " + dir.storage.probe_path + ": " + std::strerror(errno));
    return o;
  }
  std::memset(f.map, 0, kProbeBytes);  // the pages exist, as a pool's do
  const cudaError_t e = cudaHostRegister(f.map, kProbeBytes, cudaHostRegisterMapped);
  if (e == cudaSuccess) {
    cudaHostUnregister(f.map);
    o.add("result", "accepted");
  } else {
    cudaGetLastError();  // the refusal is the answer, not a pending error
    o.add("result", "refused");
    o.add("reason", std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
  }
  return o;
}

// A directory on a disk file system to probe: the snapshot directory's, else /var/tmp or /tmp.
std::optional<directory_facts> disk_directory(const directory_facts& snapshots) {
  if (!snapshots.storage.gpu_mappable) return snapshots;
  for (const char* candidate : {"/var/tmp", "/tmp"}) {
    directory_facts d = describe_directory(candidate);
    if (d.exists && !d.storage.gpu_mappable) return d;
  }
  return std::nullopt;
}

json::value host_registration_json(const gpm::device_info& dev, const directory_facts& pm,
                                   const directory_facts& snapshots) {
  json::object o;
  if (!dev.present) {
    o.add("skipped", "no GPU (" + dev.absent_reason +
                         "): host registration can only be probed "
                         "on a machine with a GPU");
    return o;
  }
  if (dev.emulated) {
    o.add("skipped",
          "the host emulator stands in for the GPU and accepts any host memory; probe "
          "with the CUDA build on a machine with a GPU");
    return o;
  }
  o.add("pm_dir", probe_registration(pm));
  if (const auto disk = disk_directory(snapshots)) {
    o.add("disk", probe_registration(*disk));
  } else {
    o.add("disk", "not probed: no directory on a disk file system found");
  }
  return o;
}

std::vector<std::string> dax_nodes() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("dax", 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json::value durability_json(const directory_facts& pm, const directory_facts& snapshots) {
  json::array levels;
  auto level = [&](std::string_view name, bool available, std::string detail) {
    json::object o;
    o.add("level", name);
    o.add("available", available);
    o.add("detail", std::move(detail));
    levels.push_back(std::move(o));
  };
  level(gpm::to_string(gpm::durability::process_crash), pm.storage.gpu_mappable,
        pm.storage.gpu_mappable
            ? "pools in " + pm.path + " (" + pm.storage.file_system +
                  ") survive a crash of the process"
            : pm.path + " is on " + pm.storage.file_system +
                  ", where pools cannot be GPU-mapped: set "
                  "GPMKIT_PM_DIR (or --pm-dir) to a tmpfs directory such as /dev/shm/gpmkit");
  const std::vector<std::string> dax = dax_nodes();
  std::string nodes;
  for (const std::string& n : dax) nodes += (nodes.empty() ? "" : ", ") + n;
  level(gpm::to_string(gpm::durability::power_fail), !dax.empty(),
        dax.empty() ? "no /dev/dax* node: this machine has no persistent or CXL memory exposed as "
                      "device-DAX"
                    : "pools created on device-DAX nodes (" + nodes +
                          ") survive power loss if "
                          "the platform's persistence domain includes the CPU caches");
  level("snapshot", !snapshots.storage.gpu_mappable,
        !snapshots.storage.gpu_mappable
            ? "snapshots (pool.snapshot(), gpmkit pool snapshot) go to " + snapshots.path + " (" +
                  snapshots.storage.file_system + "), which survives power loss"
            : snapshots.path + " is on " + snapshots.storage.file_system +
                  ", which power loss erases: "
                  "set GPMKIT_SNAPSHOT_DIR (or --snapshot-dir) to a directory on disk");
  return levels;
}

int run_info(const parsed_args&, context& ctx) {
  const gpm::device_info dev = gpm::query_device();
  directory_facts pm = describe_directory(pm_dir(ctx.options));
  directory_facts snapshots = describe_directory(snapshot_dir(ctx.options));

  json::object o;
  o.add("gpmkit_version", GPM_VERSION_STRING);
  o.add("backend", GPM_BACKEND_NAME);
  o.add("backend_description", GPM_BACKEND_CUDA ? "CUDA: kernels run on the GPU"
                                                : "host SIMT emulator: kernels run on CPU threads");
  o.add("device", device_json(dev));
  o.add("host_registration", host_registration_json(dev, pm, snapshots));
  json::object pm_json = to_json(pm);
  pm_json.add("set_by", source_of(ctx.options.pm_dir, "GPMKIT_PM_DIR"));
  pm_json.add("gpu_mappable", pm.storage.gpu_mappable);
  o.add("pm_dir", std::move(pm_json));
  json::object snap_json = to_json(snapshots);
  snap_json.add("set_by", source_of(ctx.options.snapshot_dir, "GPMKIT_SNAPSHOT_DIR"));
  o.add("snapshot_dir", std::move(snap_json));
  o.add("durability", durability_json(pm, snapshots));
  emit(ctx, o);
  return kExitOk;
}

}  // namespace

std::vector<command> system_info_commands() {
  return {{{"info",
            {},
            {},
            "Show what this machine offers gpmkit: the backend, the GPU, whether host memory "
            "can be mapped into it (probed live), the PM and snapshot directories and the "
            "durability levels available.",
            "The probes map a 64 KiB file in the PM directory and in a disk directory and ask "
            "CUDA to register it (cudaHostRegisterMapped); they are skipped without a GPU.\n"
            "A value shown as \"unknown\" is null in the JSON output."},
           run_info}};
}

}  // namespace gpmkit
