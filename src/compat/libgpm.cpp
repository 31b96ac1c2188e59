// libGPM's mapping primitives on gpm::pool (see libgpm.hpp). Each mapped path is one pool with
// layout "libgpm" holding one object, "region".
#include <gpm/compat/libgpm.hpp>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include <gpm/pool/pool.hpp>

#include "guard.hpp"

namespace {

namespace compat = gpm::detail::compat;

constexpr char kLayout[] = "libgpm";
constexpr char kRegion[] = "region";

std::mutex mapped_mutex;
std::map<std::string, gpm::pool>& mapped() {
  static std::map<std::string, gpm::pool> m;
  return m;
}

}  // namespace

void* gpm_map(const char* path, std::size_t size, bool create) {
  return compat::guarded("gpm_map", static_cast<void*>(nullptr), [&]() -> void* {
    const std::string name = compat::path_argument(path);
    std::lock_guard lock(mapped_mutex);
    const std::string key = gpm::pool::resolve(name);
    if (mapped().count(key) != 0) {
      std::fprintf(stderr, "gpm_map: %s is already mapped\n", key.c_str());
      return nullptr;
    }
    gpm::pool p = [&] {
      if (!create) return gpm::pool::open(name, kLayout);
      gpm::require(size > 0, "cannot create a region of 0 bytes");
      gpm::pool_options o;
      o.directory_capacity = 1;
      return gpm::pool::create(name, compat::one_object_pool_bytes(size), kLayout, o);
    }();
    const auto region_address = [&]() -> void* {
      if (create) p.allocate(kRegion, size, 4096);
      const gpm::pool_object region = p.get(kRegion);
      if (region.bytes < size) {
        std::fprintf(stderr, "gpm_map: %s holds %llu bytes, fewer than the %zu asked for\n",
                     key.c_str(), static_cast<unsigned long long>(region.bytes), size);
        return nullptr;
      }
      return p.ref().ptr<char>(region.offset);
    };
    void* addr = create ? compat::initialize_or_remove(p, region_address) : region_address();
    if (addr == nullptr) return nullptr;
    mapped().emplace(key, std::move(p));
    return addr;
  });
}

void gpm_unmap(const char* path, void*, std::size_t) {
  compat::guarded("gpm_unmap", 0, [&] {
    const std::string name = compat::path_argument(path);
    std::lock_guard lock(mapped_mutex);
    if (mapped().erase(gpm::pool::resolve(name)) == 0) {
      std::fprintf(stderr, "gpm_unmap: %s is not mapped\n", path);
    }
    return 0;
  });
}
