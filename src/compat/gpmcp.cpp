// libGPM's checkpoint API on gpm::checkpointer (see gpmcp.hpp). Each path is one pool with layout
// "gpmcp" holding one checkpoint, "gpmcp"; the n-th buffer registered in group g is the chunk
// named "g<g>.<n>", which is what makes registration order matter here and nowhere else.
#include <gpm/compat/gpmcp.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/checkpoint/format.hpp>

#include "guard.hpp"

namespace {

namespace compat = gpm::detail::compat;

constexpr char kLayout[] = "gpmcp";
constexpr char kName[] = "gpmcp";

// Runs `body`: 0 on success, -1 (with the reason on stderr) on any failure.
template <class F>
int report(const char* call, F&& body) noexcept {
  return compat::guarded(call, -1, [&] {
    body();
    return 0;
  });
}

// Bytes of the pool for `size` bytes of data in `chunks` chunks: two copies of every byte, each
// copy page-aligned, plus the checkpoint's own object and the pool's header and directory (well
// under 1 MiB for 2 * chunks + 1 objects). Too large is invalid_argument.
std::uint64_t checkpoint_pool_bytes(std::uint64_t size, std::uint64_t chunks) {
  const auto padded = gpm::checked_add(size, chunks * 4096);  // chunks is at most kMaxChunksLimit
  const auto data = padded ? gpm::checked_mul(*padded, 2) : std::nullopt;
  const auto all =
      data ? gpm::checked_add(*data, gpm::format::checkpoint::object_bytes(chunks) + (1 << 20))
           : std::nullopt;
  const auto pages = all ? gpm::checked_round_up(*all, 4096) : std::nullopt;
  if (!pages) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     std::to_string(size) + " bytes are too large for a pool");
  }
  return *pages;
}

}  // namespace

struct gpmcp {
  gpm::pool pool;
  std::optional<gpm::checkpointer> cp;
  std::map<unsigned, unsigned> registered;  // per group, buffers registered in this process
};

gpmcp* gpmcp_create(const char* path, std::size_t size, std::size_t elements, unsigned groups) {
  return compat::guarded("gpmcp_create", static_cast<gpmcp*>(nullptr), [&] {
    const std::string name = compat::path_argument(path);
    const auto chunks = gpm::checked_mul(elements, groups);
    gpm::require(elements >= 1 && groups >= 1 && chunks &&
                     *chunks <= gpm::format::checkpoint::kMaxChunksLimit,
                 "gpmcp_create: elements x groups must be 1 to " +
                     std::to_string(gpm::format::checkpoint::kMaxChunksLimit));
    gpm::pool_options o;
    o.directory_capacity = static_cast<std::uint32_t>(2 * *chunks + 1);
    gpm::checkpoint_options co;
    co.max_chunks = static_cast<std::uint32_t>(*chunks);
    // The checkpointer keeps a reference to the pool: the pool is in its final place first.
    std::unique_ptr<gpmcp> h(new gpmcp{
        gpm::pool::create(name, checkpoint_pool_bytes(size, *chunks), kLayout, o), {}, {}});
    compat::initialize_or_remove(
        h->pool, [&] { h->cp.emplace(gpm::checkpointer::create(h->pool, kName, co)); });
    return h.release();
  });
}

gpmcp* gpmcp_open(const char* path) {
  return compat::guarded("gpmcp_open", static_cast<gpmcp*>(nullptr), [&] {
    std::unique_ptr<gpmcp> h(
        new gpmcp{gpm::pool::open(compat::path_argument(path), kLayout), {}, {}});
    h->cp.emplace(gpm::checkpointer::open(h->pool, kName));
    return h.release();
  });
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
