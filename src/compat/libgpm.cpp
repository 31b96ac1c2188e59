// libGPM's mapping primitives on gpm::pool (see libgpm.hpp). Each mapped path is one pool with
// layout "libgpm" holding one object, "region".
#include <gpm/compat/libgpm.hpp>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include <gpm/pool/pool.hpp>

namespace {

constexpr char kLayout[] = "libgpm";
constexpr char kRegion[] = "region";

std::mutex mapped_mutex;
std::map<std::string, gpm::pool>& mapped() {
  static std::map<std::string, gpm::pool> m;
  return m;
}

}  // namespace

void* gpm_map(const char* path, std::size_t size, bool create) {
  try {
    std::lock_guard lock(mapped_mutex);
    const std::string key = gpm::pool::resolve(path);
    if (mapped().count(key) != 0) {
      std::fprintf(stderr, "gpm_map: %s is already mapped\n", key.c_str());
      return nullptr;
    }
    gpm::pool p = [&] {
      if (!create) return gpm::pool::open(path, kLayout);
      // The pool holds the region plus its own metadata (header, root, a one-page directory).
      const std::uint64_t bytes = (size + 4095) / 4096 * 4096 + 4 * 4096;
      gpm::pool_options o;
      o.directory_capacity = 1;
      gpm::pool q = gpm::pool::create(path, bytes, kLayout, o);
      q.allocate(kRegion, size, 4096);
      return q;
    }();
    const gpm::pool_object region = p.get(kRegion);
    if (region.bytes < size) {
      std::fprintf(stderr, "gpm_map: %s holds %llu bytes, fewer than the %zu asked for\n",
                   key.c_str(), static_cast<unsigned long long>(region.bytes), size);
      return nullptr;
    }
    void* addr = p.ref().ptr<char>(region.offset);
    mapped().emplace(key, std::move(p));
    return addr;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "gpm_map: %s\n", e.what());
    return nullptr;
  }
}

void gpm_unmap(const char* path, void*, std::size_t) {
  std::lock_guard lock(mapped_mutex);
  mapped().erase(gpm::pool::resolve(path));
}
