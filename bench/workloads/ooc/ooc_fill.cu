// gpmbench `ooc_ablation_fill`: the two ways a line can go from the pinned host cache into the
// GPU cache (issue 18: "zero-copy loads or copy-engine transfers; measure both"), measured apart
// from the rest of a miss (the request's round trip, the host cache lookup, a file read), which
// both ways share. A miss waits for one line, so each mode moves `lines` lines one after another
// (the record's time over sizes.lines is one line's):
//   copy-engine      a host thread: cudaMemcpyAsync host -> device on its own stream, then waits
//                    for the stream (what gpm::ooc's I/O threads did per request until they kept
//                    several under way)
//   copy-engine-batched  the same with kBatch copies issued before each wait (as an I/O thread
//                    with several requests under way copies: the fixed cost of a copy and a
//                    wait, paid once per batch)
//   zero-copy-warp   one warp of a running kernel loads the line from mapped pinned memory with
//                    16-byte loads and stores it into GPU memory (the lanes of a warp that missed)
//   zero-copy-block  the same with a block of 256 threads
// Cases: line sizes 64 KiB to 2 MiB (gpm::ooc's range on a GPU). Each call writes new data into
// the source and the check after timing reads every line back. docs/workloads/ooc.md.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpm/platform/kernel.cuh>
#include <gpm/platform/macros.hpp>
#include <gpm/platform/pinned_buffer.hpp>
#include <gpm/platform/runtime.hpp>

#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"
#include "workloads/common/stream_pattern.cuh"

namespace gpmbench::ooc {

namespace {

constexpr unsigned kBlockThreads = 256;
constexpr unsigned kUnroll = 8;  // 16-byte loads a thread has in flight before it stores
constexpr std::uint64_t kBatch = 8;  // copy-engine-batched: copies issued before a wait

// The first `copiers` threads of the launch's one block copy the lines one after another, each
// line by all of them together.
__global__ void copy_lines(const uint4* __restrict__ src, uint4* __restrict__ dst,
                           std::uint64_t line_vecs, std::uint64_t lines, unsigned copiers) {
  if (threadIdx.x >= copiers) return;
  for (std::uint64_t l = 0; l < lines; ++l) {
    const uint4* s = src + l * line_vecs;
    uint4* d = dst + l * line_vecs;
    for (std::uint64_t i = threadIdx.x; i < line_vecs; i += std::uint64_t{copiers} * kUnroll) {
      uint4 v[kUnroll];
      GPM_UNROLL
      for (unsigned k = 0; k < kUnroll; ++k) {
        const std::uint64_t j = i + std::uint64_t{k} * copiers;
        if (j < line_vecs) v[k] = s[j];
      }
      GPM_UNROLL
      for (unsigned k = 0; k < kUnroll; ++k) {
        const std::uint64_t j = i + std::uint64_t{k} * copiers;
        if (j < line_vecs) d[j] = v[k];
      }
    }
    // The line is whole before the next begins, as a miss's line is before the kernel reads it.
    if (copiers > 32) {
      __syncthreads();
    } else {
      __syncwarp();
    }
  }
}

enum class fill_way { copy_engine, copy_engine_batched, zero_copy_warp, zero_copy_block };

constexpr bool by_copy_engine(fill_way w) {
  return w == fill_way::copy_engine || w == fill_way::copy_engine_batched;
}

std::uint64_t line_bytes_of(const std::string& c) {
  if (c == "line-64K") return 64u << 10;
  if (c == "line-256K") return 256u << 10;
  if (c == "line-1M") return 1u << 20;
  if (c == "line-2M") return 2u << 20;
  throw std::logic_error("no ooc_ablation_fill case named \"" + c + "\"");
}

template <fill_way Way>
measurement fill_mode(const mode_context& ctx) {
  const std::uint64_t line = line_bytes_of(ctx.case_name);
  // 128 lines on a GPU (256 MiB at 2 MiB lines); fewer where the emulator's threads copy.
  const std::uint64_t lines = ctx.options.quick ? 2 : ctx.device.emulated ? 8 : 128;
  const std::uint64_t line_vecs = line / sizeof(uint4);
  const std::uint64_t vecs = lines * line_vecs;
  gpm::pinned_buffer<uint4> src(vecs, !by_copy_engine(Way));
  gpm::device_buffer<uint4> dst(vecs);
  const gpm::stream s(true);  // non-blocking, as an I/O thread's
  unsigned call = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int c) {
    call = static_cast<unsigned>(c) + 1;
    for (std::uint64_t i = 0; i < vecs; ++i) src.data()[i] = stream_pattern(i, call);
    if constexpr (by_copy_engine(Way)) {
      const std::uint64_t batch = Way == fill_way::copy_engine ? 1 : kBatch;
      return seconds_on_host([&] {
        for (std::uint64_t l = 0; l < lines; ++l) {
          gpm::check_cuda(cudaMemcpyAsync(dst.data() + l * line_vecs, src.data() + l * line_vecs,
                                          line, cudaMemcpyHostToDevice, s),
                          "cudaMemcpyAsync");
          if ((l + 1) % batch == 0 || l + 1 == lines) s.synchronize();
        }
      });
    } else {
      const unsigned copiers = Way == fill_way::zero_copy_warp ? 32 : kBlockThreads;
      return seconds_on_stream(s, [&] {
        gpm::launch(copy_lines, 1, copiers, 0, s, src.device_data(), dst.data(), line_vecs, lines,
                    copiers);
      });
    }
  });
  // Every line of the last call arrived.
  std::vector<uint4> back(vecs);
  dst.copy_to_host(back.data(), vecs);
  require_stream_pattern(back.data(), vecs, call, "ooc_ablation_fill",
                         "not what the last call wrote");
  // The time per line is the record's time over sizes.lines.
  m.sizes = {{"line_bytes", line}, {"lines", lines}};
  m.throughput = gigabytes(lines * line);
  return m;
}

}  // namespace

workload ablation_fill_workload() {
  return {"ooc_ablation_fill",
          "how a line reaches the GPU cache from pinned host memory: copy engine (an I/O "
          "thread's cudaMemcpyAsync and wait, per line or per 8 lines) or zero-copy loads by a "
          "warp or a block, one line at a time, 64 KiB to 2 MiB lines",
          {{"copy-engine", "a host thread: cudaMemcpyAsync of the line, then a wait for its stream",
            "", fill_mode<fill_way::copy_engine>},
           {"copy-engine-batched",
            "a host thread: cudaMemcpyAsync of 8 lines, then one wait for its stream", "",
            fill_mode<fill_way::copy_engine_batched>},
           {"zero-copy-warp", "one warp of a kernel loads the line from mapped pinned memory", "",
            fill_mode<fill_way::zero_copy_warp>},
           {"zero-copy-block",
            "a block of 256 threads of a kernel loads the line from mapped pinned memory", "",
            fill_mode<fill_way::zero_copy_block>}},
          {"line-64K", "line-256K", "line-1M", "line-2M"}};
}

}  // namespace gpmbench::ooc
