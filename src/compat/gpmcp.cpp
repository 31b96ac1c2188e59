// libGPM's checkpoint API on gpm::checkpointer (see gpmcp.hpp). Each path is one pool with layout
// "gpmcp" holding one checkpoint, "gpmcp"; the n-th buffer registered in group g is the chunk
// named "g<g>.<n>", which is what makes registration order matter here and nowhere else.
#include <gpm/compat/gpmcp.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/checkpoint/format.hpp>

namespace {

constexpr char kLayout[] = "gpmcp";
constexpr char kName[] = "gpmcp";

template <class F>
int report(const char* call, F&& f) {
  try {
    f();
    return 0;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "%s: %s\n", call, e.what());
    return -1;
  }
}

}  // namespace

struct gpmcp {
  gpm::pool pool;
  std::optional<gpm::checkpointer> cp;
  std::map<unsigned, unsigned> registered;  // per group, buffers registered in this process
};

gpmcp* gpmcp_create(const char* path, std::size_t size, std::size_t elements, unsigned groups) {
  gpmcp* out = nullptr;
  report("gpmcp_create", [&] {
    gpm::require(elements >= 1 && groups >= 1 &&
                     elements * groups <= gpm::format::checkpoint::kMaxChunksLimit,
                 "gpmcp_create: elements x groups must be 1 to " +
                     std::to_string(gpm::format::checkpoint::kMaxChunksLimit));
    const std::uint64_t chunks = elements * groups;
    // Two copies of every byte, each copy page-aligned, plus the checkpoint's own object and the
    // pool's header and directory (well under 1 MiB for 2 * chunks + 1 objects).
    const std::uint64_t data = 2 * (size + chunks * 4096);
    const std::uint64_t meta = gpm::format::checkpoint::object_bytes(chunks) + (1 << 20);
    gpm::pool_options o;
    o.directory_capacity = static_cast<std::uint32_t>(2 * chunks + 1);
    gpm::pool p = gpm::pool::create(path, (data + meta + 4095) / 4096 * 4096, kLayout, o);
    gpm::checkpoint_options co;
    co.max_chunks = static_cast<std::uint32_t>(chunks);
    auto* h = new gpmcp{std::move(p), std::nullopt, {}};
    try {
      h->cp.emplace(gpm::checkpointer::create(h->pool, kName, co));
    } catch (...) {
      delete h;
      throw;
    }
    out = h;
  });
  return out;
}

gpmcp* gpmcp_open(const char* path) {
  gpmcp* out = nullptr;
  report("gpmcp_open", [&] {
    auto* h = new gpmcp{gpm::pool::open(path, kLayout), std::nullopt, {}};
    try {
      h->cp.emplace(gpm::checkpointer::open(h->pool, kName));
    } catch (...) {
      delete h;
      throw;
    }
    out = h;
  });
  return out;
}

void gpmcp_close(gpmcp* cp) {
  if (cp == nullptr) return;
  report("gpmcp_close", [&] {
    cp->cp->close();
    cp->pool.close();
  });
  delete cp;
}

int gpmcp_register(gpmcp* cp, void* addr, std::size_t size, unsigned group) {
  return report("gpmcp_register", [&] {
    gpm::require(cp != nullptr, "gpmcp_register: the checkpoint is null");
    const unsigned n = cp->registered[group];
    cp->cp->add("g" + std::to_string(group) + "." + std::to_string(n), addr, size, group);
    cp->registered[group] = n + 1;
  });
}

int gpmcp_checkpoint(gpmcp* cp, unsigned group) {
  return report("gpmcp_checkpoint", [&] {
    gpm::require(cp != nullptr, "gpmcp_checkpoint: the checkpoint is null");
    cp->cp->checkpoint(group);
  });
}

int gpmcp_restore(gpmcp* cp, unsigned group) {
  return report("gpmcp_restore", [&] {
    gpm::require(cp != nullptr, "gpmcp_restore: the checkpoint is null");
    cp->cp->restore(group);
  });
}
