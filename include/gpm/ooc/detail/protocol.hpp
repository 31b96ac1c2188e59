// The contract between kernels and the host I/O threads of one gpm::ooc::mapping. Requests go
// through a queue of fixed slots in page-locked host memory mapped into the GPU. Every word has one
// writer side, because GPU atomics on host memory are not atomic with respect to CPU atomics
// (hostNativeAtomicSupported = 0 on the lent GPUs):
//   request[k]   written by the GPU thread that owns slot k (ownership is claimed in GPU memory),
//                `seq` last, with a system-scope release store;
//   response[k]  written by the host thread that serves request k, `seq` last (release), after
//                the line's copies have completed;
// host threads claim requests among themselves in host memory. Plain structs shared by the
// device engine (engine.cuh) and the host I/O service (src/ooc/io_service.cpp).
#pragma once

#include <cstdint>

namespace gpm::detail::ooc {

inline constexpr std::uint64_t kNoLine = ~0ull;

// mode::write tracks the bytes kernels wrote in granules of 4 bytes: one mask bit each, 32 per
// mask word, line_bytes / 128 words per line.
inline constexpr std::uint32_t kMaskGranule = 4;

// What a request asks the host to do with GPU cache slot `slot`.
enum request_flag : std::uint32_t {
  kEvict = 1,       // copy the slot out: it holds `evict_line`, dirty
  kEvictWhole = 2,  // with kEvict: every byte of the line was written (else: those in its mask)
  kFetch = 4,       // fill the slot with `fill_line` (host cache, else the file)
  kZero = 8,        // fill the slot with zeros (mode::write: lines are never fetched)
};

// What the host did (response::result). A request whose eviction failed changed nothing.
enum result_flag : std::uint32_t {
  kEvicted = 1,
  kFilled = 2,
};

struct alignas(64) request {
  std::uint64_t seq;  // the owner's sequence number for this slot, stored last
  std::uint64_t evict_line;
  std::uint64_t fill_line;
  std::uint32_t slot;
  std::uint32_t flags;
};

struct alignas(64) response {
  std::uint64_t seq;  // equals the request's seq once served, stored last
  std::uint32_t result;
};

// The queue as kernels see it.
struct queue_view {
  request* requests = nullptr;        // host memory, GPU address
  response* responses = nullptr;      // host memory, GPU address
  std::uint32_t* owner = nullptr;     // GPU memory: 1 while a GPU thread owns the slot
  std::uint64_t* next_seq = nullptr;  // GPU memory: the last seq used per slot (owner only)
  std::uint32_t slots = 0;
};

}  // namespace gpm::detail::ooc
