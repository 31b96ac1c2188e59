// GPHash in a few steps: a persistent hash index in a gpm::pool, filled and queried with bulk
// operations, queried from a user kernel with the warp-cooperative device view, given a bucket
// cache, then closed and reopened as after a crash (recovery runs and is timed). Runs on the
// GPU (cuda build) or the host emulator.
//
//   gphash_example [--pm-dir DIR] [--keys N]
#include <gpm/hash/gphash.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr char kLayout[] = "gphash-example";
constexpr std::uint32_t kValueBytes = 64;
constexpr std::uint32_t kWords = kValueBytes / 8;

// Sums the first word of each key's value, found with one warp per key (one-shot warp access).
__global__ void sum_values(gpm::gphash_ref<std::uint64_t> table, const std::uint64_t* keys,
                           std::uint64_t n, std::uint64_t* scratch, unsigned long long* sum) {
  auto warp = cg::tiled_partition<32>(cg::this_thread_block());
  const std::uint64_t i = (blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x) / 32;
  if (i >= n) return;
  std::uint64_t* value = scratch + i * kWords;
  if (table.find(warp, keys[i], value) == gpm::hash_status::found && warp.thread_rank() == 0) {
    atomicAdd(sum, static_cast<unsigned long long>(value[0]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  gpm::pool_options options;
  std::uint64_t n = GPM_BACKEND_CUDA ? 1u << 20 : 1u << 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--pm-dir") == 0) options.pm_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--keys") == 0) n = std::stoull(argv[i + 1]);
  }
  try {
    const std::string path = "gphash_example.pool";
    if (std::filesystem::exists(gpm::pool::resolve(path, options)))
      gpm::pool::remove(path, options);
    gpm::pool pool = gpm::pool::create(path, 256ull << 20, kLayout, options);

    // 1. Create the table and insert n keys with 64-byte values, from device buffers.
    auto table = gpm::gphash<std::uint64_t>::create(pool, "index",
                                                    {.value_bytes = kValueBytes, .top_level = 8});
    std::vector<std::uint64_t> keys(n), values(n * kWords);
    for (std::uint64_t i = 0; i < n; ++i) {
      keys[i] = 3 * i + 1;
      for (std::uint32_t w = 0; w < kWords; ++w) values[i * kWords + w] = i + w;
    }
    gpm::device_buffer<std::uint64_t> d_keys(n), d_values(n * kWords), d_out(n * kWords);
    gpm::device_buffer<gpm::hash_status> d_status(n);
    d_keys.copy_from_host(keys.data(), n);
    d_values.copy_from_host(values.data(), n * kWords);
    gpm::stream stream;
    table.insert(d_keys.data(), d_values.data(), n, d_status.data(), stream);  // durable on return
    std::printf("inserted %llu keys: load factor %.2f, %u levels from level %u, %llu resizes\n",
                static_cast<unsigned long long>(table.size()), table.load_factor(),
                table.stats().level_count, table.stats().top_level,
                static_cast<unsigned long long>(table.stats().resizes));

    // 2. Query from a user kernel through the device view.
    gpm::device_buffer<unsigned long long> d_sum(1);
    d_sum.fill_bytes(0);
    gpm::launch(sum_values, static_cast<unsigned>((n * 32 + 255) / 256), 256, 0, stream,
                table.ref(), d_keys.data(), n, d_out.data(), d_sum.data());
    stream.synchronize();
    unsigned long long sum = 0;
    d_sum.copy_to_host(&sum, 1);
    std::printf("sum of first value words: %llu (expected %llu)\n", sum,
                static_cast<unsigned long long>(n * (n - 1) / 2));

    // 3. Updates, erases and lookups with BktCache on (20% of the buckets, LFU).
    table.enable_cache({.fraction = 0.2, .policy = gpm::cache_policy::lfu});
    table.update(d_keys.data(), d_values.data(), n / 2, d_status.data(), stream);
    table.erase(d_keys.data() + n / 2, n / 4, d_status.data(), stream);
    table.find(d_keys.data(), n, d_out.data(), d_status.data(), stream);
    table.reload_cache();  // choose the hot buckets seen so far, fetched on a second stream
    table.find(d_keys.data(), n / 8, d_out.data(), d_status.data(), stream);
    const gpm::gphash_stats s = table.stats();
    std::printf(
        "after updates and erases: %llu keys; cache %llu buckets, %llu slot reads hit, "
        "%llu missed\n",
        static_cast<unsigned long long>(table.size()),
        static_cast<unsigned long long>(s.cached_buckets),
        static_cast<unsigned long long>(s.cache_hits),
        static_cast<unsigned long long>(s.cache_misses));

    // 4. Close and reopen: open() validates the header and recovers (timed).
    table = gpm::gphash<std::uint64_t>::open(pool, "index");
    const gpm::gphash_recovery& r = table.last_recovery();
    std::printf(
        "reopened: %llu keys, recovery %.3f ms (%llu INSERTING slots cleared, %llu "
        "duplicates removed, resize resumed: %s)\n",
        static_cast<unsigned long long>(r.items), r.seconds * 1e3,
        static_cast<unsigned long long>(r.inserting_cleared),
        static_cast<unsigned long long>(r.duplicates_removed), r.resize_resumed ? "yes" : "no");
    const gpm::gphash_check c = table.check();
    std::printf("check: %s\n", c.ok ? "consistent" : c.problems.front().c_str());
    pool.close();
    gpm::pool::remove(path, options);
    return c.ok && sum == n * (n - 1) / 2 ? 0 : 1;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "gphash_example: %s\n", e.what());
    return 1;
  }
}
