// gpmbench workload `platform`: what the hardware under gpmkit can do, measured side by side so
// that each persistence figure is a ratio to its ceiling from the same run (DESIGN.md,
// "Benchmarks"; platform.md has the numbers measured by hand). GPU modes store into objects of
// gpm::pool pools made durable with gpm::persist(); every mode checks its data after timing, so
// a fast but wrong kernel fails instead of producing a number.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

#include "resources.hpp"
#include "timing.hpp"
#include "workload.hpp"
#include "workloads/common/stream_pattern.cuh"
#include "workloads/platform/random_access.hpp"

namespace gpmbench {

namespace {

// ---- sizes ---------------------------------------------------------------------------------

// Named defaults per backend. The emulator runs kernels on CPU threads, so its defaults are
// smaller; --quick is for smoke tests and measures nothing meaningful.
struct platform_sizes {
  std::uint64_t stream_bytes;         // d2h_memcpy, persist_stream*, disk_fsync, snapshot pools
  std::uint64_t random_object_bytes;  // persist_random8 and cas_rate; a power of two
  std::uint64_t random_stores;
  std::uint64_t cas_increments;
  std::uint64_t latency_persists;
};
constexpr platform_sizes kGpuSizes{1024 * kMiB, 256 * kMiB, 32ull << 20, 16ull << 20, 100000};
constexpr platform_sizes kHostSizes{64 * kMiB, 256 * kMiB, 2ull << 20, 1ull << 20, 100000};
constexpr platform_sizes kQuickSizes{4 * kMiB, 4 * kMiB, 64ull << 10, 64ull << 10, 1000};

platform_sizes sizes_for(const mode_context& ctx) {
  platform_sizes s = ctx.options.quick ? kQuickSizes : ctx.device.emulated ? kHostSizes : kGpuSizes;
  if (ctx.options.bytes) s.stream_bytes = *ctx.options.bytes;
  return s;
}

constexpr std::uint64_t kLatencyWords = 4096;  // persist_latency cycles through 32 KiB (2^n words)
constexpr unsigned kTouchThreads = 256;        // snapshot modes: one thread per touched page

// ---- patterns shared by kernels and the host's checks ---------------------------------------

// gpm::mix64 spreads consecutive indices over the whole object.
using gpm::mix64;

// persist_stream's 16 bytes at index i in call `seed`: stream_pattern (stream_pattern.cuh).

// ---- kernels --------------------------------------------------------------------------------

template <bool PersistEachStore>
__device__ inline void stream_store(uint4* dst, std::uint64_t i, unsigned seed) {
  dst[i] = stream_pattern(i, seed);
  if constexpr (PersistEachStore) gpm::persist();
}

// Coalesced 16-byte grid-stride stores of n uint4 into host-mapped pool memory. Four independent
// stores per iteration keep more writes in flight per thread.
template <bool PersistEachStore>
__global__ void stream_stores(uint4* dst, std::uint64_t n, unsigned seed) {
  const std::uint64_t stride = gpm::tile_count();
  std::uint64_t i = gpm::tile_index();
  for (; i + 3 * stride < n; i += 4 * stride) {
    stream_store<PersistEachStore>(dst, i, seed);
    stream_store<PersistEachStore>(dst, i + stride, seed);
    stream_store<PersistEachStore>(dst, i + 2 * stride, seed);
    stream_store<PersistEachStore>(dst, i + 3 * stride, seed);
  }
  for (; i < n; i += stride) stream_store<PersistEachStore>(dst, i, seed);
  // One persist covers every store of this thread: it returns once they reached host memory.
  if constexpr (!PersistEachStore) gpm::persist();
}

// The same stores, each warp writing its own contiguous share of the object from start to end,
// as warps write logs laid out a region per warp (hcl_log): the same bytes and store widths, but
// the stores in flight at any moment are spread over the whole object instead of lying together.
__global__ void warp_region_stores(uint4* dst, std::uint64_t n, unsigned seed) {
  const std::uint64_t warps = gpm::tile_count<32>();
  const std::uint64_t share = (n + warps - 1) / warps;
  const std::uint64_t begin = gpm::tile_index<32>() * share;
  const std::uint64_t end = std::min(n, begin + share);
  std::uint64_t i = begin + gpm::lane_id();
  for (; i + 3 * 32 < end; i += 4 * 32) {
    stream_store<false>(dst, i, seed);
    stream_store<false>(dst, i + 32, seed);
    stream_store<false>(dst, i + 2 * 32, seed);
    stream_store<false>(dst, i + 3 * 32, seed);
  }
  for (; i < end; i += 32) stream_store<false>(dst, i, seed);
  gpm::persist();
}

// Coalesced grid-stride copy of n uint4 from the pool into GPU memory: the pool read sweeps.
__global__ void sweep_copy(const uint4* src, uint4* dst, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) dst[i] = src[i];
}

// The same stores, staged in shared memory and written by Hopper's bulk-copy engine
// (cp.async.bulk, shared -> global) 16 KiB at a time, double-buffered: whole-chunk writes that
// can cross PCIe like a DMA copy does. On other GPUs and on the host backend the staged chunk is
// written with plain stores.
constexpr unsigned kBulkChunkWords = 1024;  // 16 KiB of uint4

__global__ void bulk_stream_stores(uint4* dst, std::uint64_t n, unsigned seed) {
  __shared__ __align__(128) uint4 staging[2][kBulkChunkWords];
  const std::uint64_t chunks = n / kBulkChunkWords;
  int b = 0;
  for (std::uint64_t c = blockIdx.x; c < chunks; c += gridDim.x, b ^= 1) {
    const std::uint64_t base = c * kBulkChunkWords;
    for (unsigned k = threadIdx.x; k < kBulkChunkWords; k += blockDim.x) {
      staging[b][k] = stream_pattern(base + k, seed);
    }
#if GPM_IN_GPU_CODE && __CUDA_ARCH__ >= 900
    // The copy engine reads shared memory through the async proxy: order the stores before it.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned src = static_cast<unsigned>(__cvta_generic_to_shared(staging[b]));
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + base),
                   "r"(src), "r"(kBulkChunkWords * 16u)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      // The other buffer's copy (issued last iteration) may still read it; this one's must be
      // done reading before the buffer is refilled two iterations from now.
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    }
    __syncthreads();
#else
    __syncthreads();
    for (unsigned k = threadIdx.x; k < kBulkChunkWords; k += blockDim.x) {
      dst[base + k] = staging[b][k];
    }
    __syncthreads();
#endif
  }
  for (std::uint64_t i : gpm::grid_stride(chunks * kBulkChunkWords, n)) {
    dst[i] = stream_pattern(i, seed);
  }
#if GPM_IN_GPU_CODE && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // every copy written
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }
#endif
  gpm::persist();
}

// One thread: store, persist, store, persist ... so each persist waits for its store's round trip.
__global__ void persist_chain(std::uint64_t* words, std::uint64_t mask, std::uint64_t persists) {
  for (std::uint64_t i = 0; i < persists; ++i) {
    words[i & mask] = i + 1;
    gpm::persist();
  }
}

// Writes `stamp` into the first word of `pages` pages spread evenly over the object.
__global__ void touch_pages(char* object, std::uint64_t page_bytes, std::uint64_t object_pages,
                            std::uint64_t pages, std::uint64_t stamp) {
  for (std::uint64_t j : gpm::grid_stride(pages)) {
    *reinterpret_cast<std::uint64_t*>(object + j * object_pages / pages * page_bytes) = stamp;
    gpm::persist();
  }
}

// ---- modes ----------------------------------------------------------------------------------

measurement d2h_memcpy(const mode_context& ctx) {
  return measure_d2h_memcpy(ctx, sizes_for(ctx).stream_bytes);
}

enum class stream_kind { persist_per_thread, persist_each_store, bulk_copy, warp_regions };

constexpr const char* stream_mode_name(stream_kind k) {
  switch (k) {
    case stream_kind::persist_per_thread: return "persist_stream";
    case stream_kind::persist_each_store: return "persist_stream_fence_each";
    case stream_kind::bulk_copy: return "persist_stream_bulk";
    case stream_kind::warp_regions: return "persist_warp_regions";
  }
  return "";
}

template <stream_kind Kind>
measurement persist_stream_of(const mode_context& ctx, std::uint64_t bytes) {
  const std::uint64_t n = bytes / sizeof(uint4);
  const bench_pool p(ctx, stream_mode_name(Kind), pool_bytes_for(bytes), bytes);
  uint4* dst = p.device<uint4>();
  const auto [blocks, threads] = filling_geometry(ctx);
  const gpm::stream s;
  unsigned seed = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    seed = static_cast<unsigned>(call) + 1;
    return seconds_on_stream(s, [&] {
      if constexpr (Kind == stream_kind::bulk_copy) {
        gpm::launch(bulk_stream_stores, blocks, threads, 0, s, dst, n, seed);
      } else if constexpr (Kind == stream_kind::warp_regions) {
        gpm::launch(warp_region_stores, blocks, threads, 0, s, dst, n, seed);
      } else {
        gpm::launch(stream_stores<Kind == stream_kind::persist_each_store>, blocks, threads, 0, s,
                    dst, n, seed);
      }
    });
  });
  require_stream_pattern(p.host<uint4>(), n, seed, stream_mode_name(Kind),
                         "not what the last call stored");
  m.sizes = {{"bytes", bytes}, {"blocks", blocks}, {"threads_per_block", threads}};
  m.throughput = gigabytes(bytes);
  m.bytes_persisted = bytes;
  return m;
}

template <stream_kind Kind>
measurement persist_stream(const mode_context& ctx) {
  return persist_stream_of<Kind>(ctx, sizes_for(ctx).stream_bytes);
}

// What a timed read sweep of the pool finds before it: whether the GPU read the same pool pages
// and wrote the same GPU memory before (warm), or the pool was just created and filled by the CPU,
// or just written by the GPU (as a log is before recovery reads it), or the GPU memory was just
// allocated. Each call of the cold kinds starts from a new pool or a new allocation.
enum class sweep_kind { warm, fresh_pool, gpu_written_pool, fresh_destination };

constexpr const char* sweep_mode_name(sweep_kind k) {
  switch (k) {
    case sweep_kind::warm: return "read_sweep";
    case sweep_kind::fresh_pool: return "read_sweep_fresh_pool";
    case sweep_kind::gpu_written_pool: return "read_sweep_gpu_written";
    case sweep_kind::fresh_destination: return "read_sweep_fresh_destination";
  }
  return "";
}

template <sweep_kind Kind>
measurement read_sweep(const mode_context& ctx) {
  const std::uint64_t bytes = sizes_for(ctx).stream_bytes;
  const std::uint64_t n = bytes / sizeof(uint4);
  const auto [blocks, threads] = filling_geometry(ctx);
  const gpm::stream s;
  const auto fill = [&](const bench_pool& p, unsigned seed) {
    if constexpr (Kind == sweep_kind::gpu_written_pool) {
      gpm::launch(warp_region_stores, blocks, threads, 0, s, p.device<uint4>(), n, seed);
      s.synchronize();
    } else {
      uint4* host = p.host<uint4>();
      for (std::uint64_t i = 0; i < n; ++i) host[i] = stream_pattern(i, seed);
    }
  };
  std::optional<bench_pool> pool;
  std::optional<gpm::device_buffer<uint4>> dst;
  const auto new_pool = [&](unsigned seed) {
    pool.reset();
    pool.emplace(ctx, sweep_mode_name(Kind), pool_bytes_for(bytes), bytes);
    fill(*pool, seed);
  };
  const auto sweep = [&] {
    return seconds_on_stream(s, [&] {
      gpm::launch(sweep_copy, blocks, threads, 0, s, pool->device<uint4>(), dst->data(), n);
    });
  };
  constexpr bool fresh_pools =
      Kind == sweep_kind::fresh_pool || Kind == sweep_kind::gpu_written_pool;
  unsigned seed = 1;
  new_pool(seed);
  dst.emplace(n);
  if constexpr (!fresh_pools) sweep();  // the pages read and the memory written once, untimed
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    if constexpr (fresh_pools) new_pool(seed = static_cast<unsigned>(call) + 2);
    if constexpr (Kind == sweep_kind::fresh_destination) {
      dst.reset();
      dst.emplace(n);
    }
    return sweep();
  });
  std::vector<uint4> got(n);
  dst->copy_to_host(got.data(), n);
  require_stream_pattern(got.data(), n, seed, sweep_mode_name(Kind), "not the pool's");
  m.sizes = {{"bytes", bytes}, {"blocks", blocks}, {"threads_per_block", threads}};
  m.throughput = gigabytes(bytes);
  return m;
}

measurement persist_random8(const mode_context& ctx) {
  const platform_sizes sz = sizes_for(ctx);
  const bench_pool p(ctx, "persist_random8", pool_bytes_for(sz.random_object_bytes),
                     sz.random_object_bytes);
  return random_persists(ctx, p, sz.random_stores, "persist_random8");
}

measurement persist_latency(const mode_context& ctx) {
  const std::uint64_t persists = sizes_for(ctx).latency_persists;
  const std::uint64_t bytes = kLatencyWords * sizeof(std::uint64_t);
  const bench_pool p(ctx, "persist_latency", pool_bytes_for(bytes), bytes);
  const gpm::stream s;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    return seconds_on_stream(s, [&] {
      gpm::launch(persist_chain, 1, 1, 0, s, p.device<std::uint64_t>(), kLatencyWords - 1,
                  persists);
    });
  });
  if (p.host<std::uint64_t>()[(persists - 1) & (kLatencyWords - 1)] != persists) {
    check_failed("persist_latency: the last store is missing");
  }
  m.sizes = {{"persists", persists}};
  m.throughput = nanoseconds_each(persists);
  m.bytes_persisted = persists * sizeof(std::uint64_t);
  return m;
}

measurement cas_rate(const mode_context& ctx) {
  const platform_sizes sz = sizes_for(ctx);
  const bench_pool p(ctx, "cas_rate", pool_bytes_for(sz.random_object_bytes),
                     sz.random_object_bytes);
  return random_cas(ctx, p, sz.cas_increments, cas_scope::system, "cas_rate");
}

measurement disk_fsync(const mode_context& ctx) {
  const std::uint64_t bytes = sizes_for(ctx).stream_bytes;
  note_if_in_memory(ctx.options.disk_dir);
  const std::string path = ctx.disk_dir + "/disk_fsync.dat";
  std::vector<unsigned char> chunk(std::min(bytes, 64 * kMiB));
  fill_incompressible(chunk.data(), chunk.size());
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    ::unlink(path.c_str());  // every call writes a new file, as a snapshot's first write does
    return seconds_on_host([&] { write_file_synced(path, chunk, bytes); });
  });
  if (std::filesystem::file_size(path) != bytes) {
    check_failed("disk_fsync: the file has the wrong size");
  }
  std::filesystem::remove(path);
  m.sizes = {{"bytes", bytes}};
  m.throughput = gigabytes(bytes);
  m.bytes_persisted = bytes;
  return m;
}

measurement snapshot_full(const mode_context& ctx) {
  const std::uint64_t bytes = sizes_for(ctx).stream_bytes;
  bench_pool p(ctx, "snapshot_full", bytes);
  fill_incompressible(p.host<unsigned char>(), p.object_bytes());
  gpm::snapshot_result last;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    p.forget_snapshots();
    return seconds_on_host([&] { last = p.pool().snapshot(); });
  });
  if (last.seq != 1 || last.pages_changed != last.pages_total) {
    check_failed("snapshot_full: the snapshot was not a full one (seq " + std::to_string(last.seq) +
                 ", " + std::to_string(last.pages_changed) + " of " +
                 std::to_string(last.pages_total) + " pages)");
  }
  m.sizes = {{"pool_bytes", bytes},
             {"pages_total", last.pages_total},
             {"pages_changed", last.pages_changed},
             {"bytes_written", last.bytes_written}};
  m.throughput = gigabytes(bytes);
  m.bytes_persisted = last.bytes_written;
  return m;
}

// Incremental snapshots after a kernel changed `percent` percent of the pool's pages.
measurement snapshot_incremental(const mode_context& ctx, std::uint64_t percent, const char* name) {
  const std::uint64_t bytes = sizes_for(ctx).stream_bytes;
  bench_pool p(ctx, name, bytes);
  fill_incompressible(p.host<unsigned char>(), p.object_bytes());
  const gpm::snapshot_result base = p.pool().snapshot();  // what the increments build on
  const std::uint64_t page_bytes = bytes / base.pages_total;
  const std::uint64_t object_pages = p.object_bytes() / page_bytes;
  // At 100%, every page of the object (the pool's header and directory pages are not the
  // kernel's; they change with the snapshot's root record anyway).
  const std::uint64_t touched =
      std::min(object_pages, std::max<std::uint64_t>(1, base.pages_total * percent / 100));
  const unsigned blocks = static_cast<unsigned>((touched + kTouchThreads - 1) / kTouchThreads);
  const gpm::stream s;
  gpm::snapshot_result last;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    gpm::launch(touch_pages, blocks, kTouchThreads, 0, s, p.device<char>(), page_bytes,
                object_pages, touched, static_cast<std::uint64_t>(call) + 1);
    s.synchronize();  // a snapshot must not run while a kernel writes the pool
    const double t = seconds_on_host([&] { last = p.pool().snapshot(); });
    if (last.pages_changed < touched) {
      check_failed(std::string(name) + ": the snapshot found " +
                   std::to_string(last.pages_changed) + " changed pages; the kernel changed " +
                   std::to_string(touched));
    }
    return t;
  });
  // The pool's root record changes too (it records the snapshot's number), so pages_changed
  // can exceed pages_touched; the throughput counts every page the snapshot wrote.
  m.sizes = {{"pool_bytes", bytes},
             {"page_bytes", page_bytes},
             {"pages_total", last.pages_total},
             {"pages_touched", touched},
             {"pages_changed", last.pages_changed},
             {"bytes_written", last.bytes_written}};
  m.throughput = gigabytes(last.pages_changed * page_bytes);
  m.bytes_persisted = last.bytes_written;
  return m;
}

}  // namespace

measurement measure_persist_stream(const mode_context& ctx, std::uint64_t bytes) {
  return persist_stream_of<stream_kind::persist_per_thread>(ctx, bytes);
}

workload platform_workload() {
  return {
      "platform",
      "the platform's ceilings and gpmkit's persistence primitives, side by side",
      {
          {"d2h_memcpy", "cudaMemcpy device -> pinned host: the ceiling for GPU stores", "",
           d2h_memcpy},
          {stream_mode_name(stream_kind::persist_per_thread),
           "coalesced 16-byte stores into a pool, one persist per thread", "d2h_memcpy",
           persist_stream<stream_kind::persist_per_thread>},
          {stream_mode_name(stream_kind::persist_each_store),
           "the same with a persist after every store", "d2h_memcpy",
           persist_stream<stream_kind::persist_each_store>},
          {stream_mode_name(stream_kind::bulk_copy),
           "the same bytes staged in shared memory, written by the bulk-copy engine (sm_90)",
           "d2h_memcpy", persist_stream<stream_kind::bulk_copy>},
          {stream_mode_name(stream_kind::warp_regions),
           "the same stores, each warp writing its own contiguous share in turn (a region per "
           "warp, as hcl_log lays out logs)",
           "d2h_memcpy", persist_stream<stream_kind::warp_regions>},
          {sweep_mode_name(sweep_kind::warm),
           "coalesced reads of a pool into GPU memory, both read and written before", "d2h_memcpy",
           read_sweep<sweep_kind::warm>},
          {sweep_mode_name(sweep_kind::fresh_pool),
           "the same from a pool just created and filled by the CPU", "d2h_memcpy",
           read_sweep<sweep_kind::fresh_pool>},
          {sweep_mode_name(sweep_kind::gpu_written_pool),
           "the same from a pool just created and written by the GPU (as a log before recovery)",
           "d2h_memcpy", read_sweep<sweep_kind::gpu_written_pool>},
          {sweep_mode_name(sweep_kind::fresh_destination),
           "the same into GPU memory just allocated", "d2h_memcpy",
           read_sweep<sweep_kind::fresh_destination>},
          {"persist_random8", "random 8-byte stores into a pool, each persisted (M stores/s)", "",
           persist_random8},
          {"persist_latency", "one thread: store + persist, repeated (ns per persist)", "",
           persist_latency},
          {"cas_rate", "system-scope CAS increments of random pool words (M CAS/s)", "", cas_rate},
          {"disk_fsync", "write() + fsync() of a new file: the ceiling for snapshots", "",
           disk_fsync},
          {"snapshot_full", "full snapshot of a pool to disk (pool bytes/s)", "disk_fsync",
           snapshot_full},
          {"snapshot_1pct", "incremental snapshot after a kernel changed 1% of the pages",
           "disk_fsync",
           [](const mode_context& c) { return snapshot_incremental(c, 1, "snapshot_1pct"); }},
          {"snapshot_10pct", "incremental snapshot after a kernel changed 10% of the pages",
           "disk_fsync",
           [](const mode_context& c) { return snapshot_incremental(c, 10, "snapshot_10pct"); }},
          {"snapshot_100pct",
           "incremental snapshot after a kernel changed every page (as a batch of random updates "
           "over a whole table does)",
           "disk_fsync",
           [](const mode_context& c) { return snapshot_incremental(c, 100, "snapshot_100pct"); }},
      }};
}

}  // namespace gpmbench
