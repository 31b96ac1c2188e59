// gpm::hcl_log host side: geometry checks, creation and opening through the shared log object.
// The insert/read/remove protocol itself lives in include/gpm/log/detail/stream.cuh.
#include <gpm/log/hcl_log.cuh>

#include <gpm/pool/pool.hpp>

namespace gpm {
namespace {

namespace L = detail::log;

// CUDA's limits on a launch: a block has at most 1024 threads, a grid at most 2^31 - 1 blocks.
constexpr std::uint32_t max_threads_per_block = 1024;
constexpr std::uint32_t max_blocks = 0x7fffffffu;

L::header header_for(const hcl_geometry& g) {
  require(g.blocks > 0 && g.blocks <= max_blocks,
          "hcl_log: blocks must be between 1 and 2^31 - 1, got " + std::to_string(g.blocks));
  require(g.threads_per_block > 0 && g.threads_per_block <= max_threads_per_block,
          "hcl_log: threads_per_block must be between 1 and 1024, got " +
              std::to_string(g.threads_per_block));
  require(g.bytes_per_thread >= hcl_log::entry_footprint(1),
          "hcl_log: bytes_per_thread must hold at least one entry (" +
              std::to_string(hcl_log::entry_footprint(1)) + " bytes for a 1-byte entry), got " +
              std::to_string(g.bytes_per_thread));
  return L::make_header(L::kind::hcl, g.blocks, g.threads_per_block,
                        std::uint64_t{g.blocks} * g.threads_per_block,
                        L::chunks_for(g.bytes_per_thread));
}

}  // namespace

std::uint64_t hcl_log::object_bytes(const hcl_geometry& g) {
  return header_for(g).common.object_bytes;
}

hcl_log::hcl_log(L::log_object o) : object_(std::move(o)) {
  const L::header& h = object_.head();
  geometry_ = {h.blocks, h.threads_per_block, h.stream_chunks * L::chunk_bytes};
}

hcl_log hcl_log::create(pool& p, std::string_view name, const hcl_geometry& g) {
  return hcl_log(L::log_object::create(p, name, header_for(g)));
}

hcl_log hcl_log::open(pool& p, std::string_view name) {
  return hcl_log(L::log_object::open(p, name, L::kind::hcl));
}

hcl_log_ref hcl_log::ref() const { return hcl_log_ref(object_.view()); }

void hcl_log::clear() { object_.next_generation(); }

std::uint64_t hcl_log::stream_of(std::uint32_t block, std::uint32_t thread) const {
  require(block < geometry_.blocks && thread < geometry_.threads_per_block,
          "hcl_log '" + name() + "': thread " + std::to_string(thread) + " of block " +
              std::to_string(block) + " is outside its geometry of " +
              std::to_string(geometry_.blocks) + " blocks of " +
              std::to_string(geometry_.threads_per_block) + " threads");
  return std::uint64_t{block} * geometry_.threads_per_block + thread;
}

void hcl_log::clear(std::uint32_t block, std::uint32_t thread) {
  object_.clear_stream(stream_of(block, thread));
}

bool hcl_log::is_empty() const { return object_.is_empty(); }

std::uint64_t hcl_log::size(std::uint32_t block, std::uint32_t thread) const {
  return object_.used_chunks(stream_of(block, thread)) * L::chunk_bytes;
}

void hcl_log::check_faults() const {
  object_.check_faults("hcl_log",
                       "Launch kernels that use this log with " + std::to_string(geometry_.blocks) +
                           " blocks of " + std::to_string(geometry_.threads_per_block) +
                           " threads (hcl_log::grid() and block()); the log was not changed");
}

}  // namespace gpm
