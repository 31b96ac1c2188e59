// gpmbench workload `persist_scaling`: the GPM paper's Figure 3 (§3.2). The same bytes are made
// durable in a pool two ways, each with a growing number of threads:
//   gpu-<T>     T GPU threads store 8 bytes at a time into the mapped pool, each store persisted
//               (gpm::persist after every store, the paper's "8-byte granularity")
//   cap-mm-<T>  the data is in GPU memory; CAP-mm copies it to the host and T CPU threads copy
//               their equal parts into the pool and write them back (baselines.hpp)
// Few GPU threads cannot move a gigabyte in reasonable time (each persist waits ~0.6 us), so a
// mode moves at most kBytesPerGpuThread per thread; throughput, not time, is compared. Every
// mode's bytes are checked after timing.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "gpmbench/baselines.hpp"
#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"

namespace gpmbench {

namespace {

constexpr std::uint64_t kGpuBytes = 1ull << 30;   // the paper's 1 GB
constexpr std::uint64_t kHostBytes = 16ull << 20;  // the emulator runs GPU threads on CPU cores
constexpr std::uint64_t kQuickBytes = 1ull << 20;
constexpr std::uint64_t kBytesPerGpuThread = 256ull << 10;
constexpr unsigned kBlockThreads = 256;

const std::vector<unsigned> kGpuThreads = {1, 32, 256, 1024, 4096, 16384, 65536, 262144};
const std::vector<unsigned> kCpuThreads = {1, 2, 4, 8, 16, 32};

std::uint64_t total_bytes(const mode_context& ctx) {
  if (ctx.options.bytes) return *ctx.options.bytes;
  return ctx.options.quick ? kQuickBytes : ctx.device.emulated ? kHostBytes : kGpuBytes;
}

GPM_HOST_DEVICE inline std::uint64_t word_at(std::uint64_t i, std::uint64_t seed) {
  return gpm::mix64(i ^ seed);
}

__global__ void store_persist_each(std::uint64_t* dst, std::uint64_t words, std::uint64_t seed) {
  for (std::uint64_t i : gpm::grid_stride(words)) {
    dst[i] = word_at(i, seed);
    gpm::persist();
  }
}

__global__ void fill_words(std::uint64_t* dst, std::uint64_t words, std::uint64_t seed) {
  for (std::uint64_t i : gpm::grid_stride(words)) {
    dst[i] = word_at(i, seed);
  }
}

void check_words(const std::uint64_t* host, std::uint64_t words, std::uint64_t seed,
                 const std::string& mode) {
  for (std::uint64_t i = 0; i < words; ++i) {
    if (host[i] != word_at(i, seed)) {
      check_failed("persist_scaling/" + mode + ": word " + std::to_string(i) +
                   " is not what the last call persisted");
    }
  }
}

measurement gpu_threads(const mode_context& ctx, unsigned threads) {
  const std::uint64_t bytes =
      std::min(total_bytes(ctx), std::uint64_t{threads} * kBytesPerGpuThread) & ~7ull;
  const std::uint64_t words = bytes / sizeof(std::uint64_t);
  const bench_pool p(ctx, "persist_scaling_gpu", pool_bytes_for(bytes), bytes);
  const unsigned block = std::min(threads, kBlockThreads);
  const unsigned blocks = (threads + block - 1) / block;
  const gpm::stream s;
  std::uint64_t seed = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    seed = static_cast<std::uint64_t>(call) + 1;
    return seconds_on_stream(s, [&] {
      gpm::launch(store_persist_each, blocks, block, 0, s, p.device<std::uint64_t>(), words, seed);
    });
  });
  check_words(p.host<std::uint64_t>(), words, seed, "gpu-" + std::to_string(threads));
  m.sizes = {{"bytes", bytes}, {"gpu_threads", std::uint64_t{blocks} * block}};
  m.throughput = gigabytes(bytes);
  m.bytes_persisted = bytes;
  return m;
}

measurement cpu_threads(const mode_context& ctx, unsigned threads) {
  const std::uint64_t bytes = total_bytes(ctx) & ~7ull;
  const std::uint64_t words = bytes / sizeof(std::uint64_t);
  const bench_pool p(ctx, "persist_scaling_cpu", pool_bytes_for(bytes), bytes);
  gpm::device_buffer<std::uint64_t> src(words);
  cpu_team team(threads);
  cap_mm cap(team, bytes);
  const gpm::stream s;
  const geometry g = filling_geometry(ctx);
  std::uint64_t seed = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    seed = static_cast<std::uint64_t>(call) + 1;
    gpm::launch(fill_words, g.blocks, g.threads, 0, s, src.data(), words, seed);
    s.synchronize();  // the data exists in GPU memory before CAP-mm's timed part starts
    return seconds_on_host([&] { cap.persist(p.host<std::uint64_t>(), src.data(), bytes, s); });
  });
  check_words(p.host<std::uint64_t>(), words, seed, "cap-mm-" + std::to_string(threads));
  m.sizes = {{"bytes", bytes}, {"cpu_threads", threads}};
  m.throughput = gigabytes(bytes);
  m.bytes_persisted = bytes;
  return m;
}

}  // namespace

workload persist_scaling_workload() {
  workload w{"persist_scaling",
             "persisting the same bytes with more GPU threads (GPM) or CPU threads (CAP-mm): the "
             "GPM paper's Figure 3",
             {d2h_ceiling_mode(total_bytes)}};
  for (const unsigned t : kGpuThreads) {
    w.modes.push_back({"gpu-" + std::to_string(t),
                       std::to_string(t) + " GPU threads, 8-byte stores each persisted",
                       "d2h_memcpy", [t](const mode_context& c) { return gpu_threads(c, t); }});
  }
  for (const unsigned t : kCpuThreads) {
    w.modes.push_back({"cap-mm-" + std::to_string(t),
                       "CAP-mm: copy to the host, " + std::to_string(t) +
                           " CPU threads copy into the pool and write back",
                       "d2h_memcpy", [t](const mode_context& c) { return cpu_threads(c, t); }});
  }
  return w;
}

}  // namespace gpmbench
