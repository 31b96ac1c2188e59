// Pinned memory between the files and the GPU for gpm::ooc mappings: the staging buffers of the
// resident load and write-back (io_service::load_resident, store_resident) and the segments of
// the host caches (host_cache), shared by every mapping of the process, on huge pages
// (pinned_buffer::for_io: O_DIRECT reads into scattered 4 KiB pages ran 1.7x slower).
// Pinning host memory (locking and mapping every page) costs time in proportion to its size, at
// pinning and again at freeing: pinned per mapping, staging cost a mapping that fits the GPU about
// as much at map time as reading its data did. So the buffers outlive the uses that pinned them:
// a buffer goes back to the pool after each load or write-back, or with its host cache, and
// serves the next one, of this mapping or another. Host only; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gpm/platform/pinned_buffer.hpp>

namespace gpm::detail::ooc {

// Idle buffers the pool keeps (the smallest go beyond that): two loads' worth at the default two
// I/O threads with runs of 16 MiB (kResidentRunBytes).
inline constexpr std::uint64_t kStagingKeptBytes = 128ull << 20;

// A buffer of at least `bytes` pinned bytes, taken from the pool (or pinned if it holds none
// large enough) and given back when destroyed. A buffer pinned for it has the next power of two
// of bytes (from 64 KiB), so that later uses of similar sizes find it, or, `exact`, `bytes` (a
// host cache's segment: the cache pins no more than its cap). Throws gpm::error (out_of_memory)
// if the memory cannot be pinned.
class staging_buffer {
 public:
  explicit staging_buffer(std::uint64_t bytes, bool exact = false);
  ~staging_buffer();
  staging_buffer(const staging_buffer&) = delete;
  staging_buffer& operator=(const staging_buffer&) = delete;

  std::byte* data() const { return memory_.data(); }
  // Pinned bytes the pool holds now, idle or lent (tests).
  static std::uint64_t pinned_bytes();
  // Pinned bytes lent now (tests).
  static std::uint64_t lent_bytes();

 private:
  pinned_buffer<std::byte> memory_;
};

}  // namespace gpm::detail::ooc
