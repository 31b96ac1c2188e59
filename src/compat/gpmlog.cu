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

#include "guard.hpp"

namespace {

namespace compat = gpm::detail::compat;

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
gpm::pool create_pool(const std::string& path, std::uint64_t bytes) {
  gpm::pool_options o;
  o.directory_capacity = 1;
  return gpm::pool::create(path, compat::one_object_pool_bytes(bytes), kLayout, o);
}

// Builds a ready log's device handle.
void make_handle(open_log& l) {
  gpmlog h{};
  h.is_hcl = l.hcl.has_value();
  if (l.hcl) h.hcl = l.hcl->ref();
  if (l.conv) h.conv = l.conv->ref();
  l.handle = gpm::device_buffer<gpmlog>(1);
  l.handle.copy_from_host(&h, 1);
}

// Registers a log whose handle is made; returns the handle.
gpmlog* publish(std::unique_ptr<open_log> l) {
  gpmlog* key = l->handle.data();
  std::lock_guard lock(logs_mutex);
  logs().emplace(key, std::move(l));
  return key;
}

// Creates the log file `path` holding one log of `bytes` bytes that `make` creates in its pool,
// and publishes it; a failure after the file was created removes it again.
template <class Make>
gpmlog* create_log(const char* path, std::uint64_t bytes, Make&& make) {
  auto l = std::make_unique<open_log>(
      open_log{create_pool(compat::path_argument(path), bytes), std::nullopt, std::nullopt, {}});
  compat::initialize_or_remove(l->pool, [&] {
    make(*l);
    make_handle(*l);
  });
  return publish(std::move(l));
}

}  // namespace

gpmlog* gpmlog_create_hcl(const char* path, std::size_t size, int blocks, int threads) {
  return compat::guarded("gpmlog_create_hcl", static_cast<gpmlog*>(nullptr), [&] {
    gpm::require(blocks > 0 && threads > 0, "blocks and threads must be > 0");
    const std::uint64_t per_thread =
        size / (static_cast<std::uint64_t>(blocks) * static_cast<std::uint64_t>(threads)) / 4 * 4;
    const gpm::hcl_geometry g{static_cast<std::uint32_t>(blocks),
                              static_cast<std::uint32_t>(threads), per_thread};
    return create_log(path, gpm::hcl_log::object_bytes(g),
                      [&](open_log& l) { l.hcl = gpm::hcl_log::create(l.pool, kObject, g); });
  });
}

gpmlog* gpmlog_create_conv(const char* path, std::size_t size, int n_partitions) {
  return compat::guarded("gpmlog_create_conv", static_cast<gpmlog*>(nullptr), [&] {
    gpm::require(n_partitions > 0, "n_partitions must be > 0");
    const auto parts = static_cast<std::uint32_t>(n_partitions);
    const std::uint64_t per_partition = size / parts / 4 * 4;
    return create_log(path, gpm::conv_log::object_bytes(parts, per_partition), [&](open_log& l) {
      l.conv = gpm::conv_log::create(l.pool, kObject, parts, per_partition);
    });
  });
}

gpmlog* gpmlog_open(const char* path) {
  return compat::guarded("gpmlog_open", static_cast<gpmlog*>(nullptr), [&] {
    auto l = std::make_unique<open_log>(open_log{
        gpm::pool::open(compat::path_argument(path), kLayout), std::nullopt, std::nullopt, {}});
    try {
      l->hcl = gpm::hcl_log::open(l->pool, kObject);
    } catch (const gpm::error& e) {
      if (e.code() != gpm::errc::layout_mismatch) throw;
      l->conv = gpm::conv_log::open(l->pool, kObject);  // it is the other kind
    }
    make_handle(*l);
    return publish(std::move(l));
  });
}

void gpmlog_close(gpmlog* log) {
  compat::guarded("gpmlog_close", 0, [&] {
    std::lock_guard lock(logs_mutex);
    if (logs().erase(log) == 0) {
      std::fprintf(stderr, "gpmlog_close: %p is not an open log\n", static_cast<void*>(log));
    }
    return 0;
  });
}

int gpmlog_clear_all(gpmlog* log) {
  return compat::guarded("gpmlog_clear_all", -1, [&] {
    std::lock_guard lock(logs_mutex);
    const auto it = logs().find(log);
    if (it == logs().end()) {
      std::fprintf(stderr, "gpmlog_clear_all: %p is not an open log\n", static_cast<void*>(log));
      return -1;
    }
    if (it->second->hcl) it->second->hcl->clear();
    if (it->second->conv) it->second->conv->clear();
    return 0;
  });
}
