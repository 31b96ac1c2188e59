// libGPM's logging C API on gpm::hcl_log and gpm::conv_log (see gpmlog.hpp). Each log path is a
// pool with layout "gpmlog" holding one object, "log". The handle kernels receive is a copy of
// the log's device view in device memory; the host keeps the pool and log objects behind it.
#include <gpm/compat/gpmlog.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <gpm/pool/pool.hpp>

namespace {

constexpr char kLayout[] = "gpmlog";
constexpr char kObject[] = "log";

struct open_log {
  gpm::pool pool;
  std::optional<gpm::hcl_log> hcl;
  std::optional<gpm::conv_log> conv;
  gpm::device_buffer<gpmlog> handle;
};

std::mutex logs_mutex;
std::map<gpmlog*, std::unique_ptr<open_log>>& logs() {
  static std::map<gpmlog*, std::unique_ptr<open_log>> m;
  return m;
}

// A pool just large enough for one object of `bytes` (plus the pool's own metadata).
gpm::pool create_pool(const char* path, std::uint64_t bytes) {
  gpm::pool_options o;
  o.directory_capacity = 1;
  return gpm::pool::create(path, (bytes + 4095) / 4096 * 4096 + 4 * 4096, kLayout, o);
}

// Publishes a ready log: builds its device handle and registers it.
gpmlog* publish(std::unique_ptr<open_log> l) {
  gpmlog h{};
  h.is_hcl = l->hcl.has_value();
  if (l->hcl) h.hcl = l->hcl->ref();
  if (l->conv) h.conv = l->conv->ref();
  l->handle = gpm::device_buffer<gpmlog>(1);
  l->handle.copy_from_host(&h, 1);
  gpmlog* key = l->handle.data();
  std::lock_guard lock(logs_mutex);
  logs().emplace(key, std::move(l));
  return key;
}

template <class F>
gpmlog* guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    return nullptr;
  }
}

}  // namespace

gpmlog* gpmlog_create_hcl(const char* path, std::size_t size, int blocks, int threads) {
  return guarded("gpmlog_create_hcl", [&] {
    gpm::require(blocks > 0 && threads > 0, "blocks and threads must be > 0");
    const std::uint64_t per_thread =
        size / (static_cast<std::uint64_t>(blocks) * static_cast<std::uint64_t>(threads)) / 4 * 4;
    const gpm::hcl_geometry g{static_cast<std::uint32_t>(blocks),
                              static_cast<std::uint32_t>(threads), per_thread};
    auto l = std::make_unique<open_log>(
        open_log{create_pool(path, gpm::hcl_log::object_bytes(g)), std::nullopt, std::nullopt, {}});
    l->hcl = gpm::hcl_log::create(l->pool, kObject, g);
    return publish(std::move(l));
  });
}

gpmlog* gpmlog_create_conv(const char* path, std::size_t size, int n_partitions) {
  return guarded("gpmlog_create_conv", [&] {
    gpm::require(n_partitions > 0, "n_partitions must be > 0");
    const auto parts = static_cast<std::uint32_t>(n_partitions);
    const std::uint64_t per_partition = size / parts / 4 * 4;
    auto l = std::make_unique<open_log>(
        open_log{create_pool(path, gpm::conv_log::object_bytes(parts, per_partition)),
                 std::nullopt,
                 std::nullopt,
                 {}});
    l->conv = gpm::conv_log::create(l->pool, kObject, parts, per_partition);
    return publish(std::move(l));
  });
}

gpmlog* gpmlog_open(const char* path) {
  return guarded("gpmlog_open", [&] {
    auto l = std::make_unique<open_log>(
        open_log{gpm::pool::open(path, kLayout), std::nullopt, std::nullopt, {}});
    try {
      l->hcl = gpm::hcl_log::open(l->pool, kObject);
    } catch (const gpm::error& e) {
      if (e.code() != gpm::errc::layout_mismatch) throw;
      l->conv = gpm::conv_log::open(l->pool, kObject);  // it is the other kind
    }
    return publish(std::move(l));
  });
}

void gpmlog_close(gpmlog* log) {
  std::lock_guard lock(logs_mutex);
  if (logs().erase(log) == 0) {
    std::fprintf(stderr, "gpmlog_close: %p is not an open log\n", static_cast<void*>(log));
  }
}

int gpmlog_clear_all(gpmlog* log) {
  std::lock_guard lock(logs_mutex);
  const auto it = logs().find(log);
  if (it == logs().end()) {
    std::fprintf(stderr, "gpmlog_clear_all: %p is not an open log\n", static_cast<void*>(log));
    return -1;
  }
  if (it->second->hcl) it->second->hcl->clear();
  if (it->second->conv) it->second->conv->clear();
  return 0;
}
