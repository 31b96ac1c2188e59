// Persist primitives and the pool's device view from kernels, and libGPM's compatibility API.
#include <gpm/compat/libgpm.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

#include <cstring>
#include <filesystem>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

__global__ void fill_and_persist(gpm::pool_ref pool, std::uint64_t off, unsigned n) {
  const auto i = static_cast<unsigned>(gpm::tile_index());
  if (i >= n) return;
  unsigned* words = pool.ptr<unsigned>(off);
  words[i] = i * 7u + 3u;
  gpm::persist(&words[i], sizeof(unsigned));
  if (i == 0) {
    words[n] = 0xabcdu;
    gpm::persist();
  }
}

TEST(Persist, KernelsWriteThePoolThroughItsRef) {
  gpm::test::scratch_dirs d("persist");
  gpm::pool_options o;
  o.pm_dir = d.pm_dir();
  o.snapshot_dir = d.snapshot_dir();
  const unsigned n = 100000;
  std::uint64_t off = 0;
  {
    gpm::pool p = gpm::pool::create("k.pool", 4 << 20, "persist", o);
    off = p.allocate("words", (n + 1) * sizeof(unsigned));
    gpm::launch(fill_and_persist, (n + 255) / 256, 256, 0, nullptr, p.ref(), off, n);
    gpm::test::sync_ok();
    // The host sees the kernel's stores in the same memory, with no copy.
    const unsigned* host = p.host_ptr<unsigned>(off);
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(host[i], i * 7u + 3u);
  }
  gpm::pool p = gpm::pool::open("k.pool", "persist", o);
  const unsigned* host = p.host_ptr<unsigned>(p.get("words").offset);
  EXPECT_EQ(host[n], 0xabcdu);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(host[i], i * 7u + 3u);
}

TEST(Persist, HostPersistWritesBackPowerFailRanges) {
  // The cache-line write-back path (used for device-DAX pools) runs on any memory.
  std::vector<char> buf(1 << 16, 1);
  gpm::detail::register_power_fail_range(buf.data(), buf.size());
  std::memset(buf.data() + 100, 2, 5000);
  gpm::persist(buf.data() + 100, 5000);
  gpm::detail::unregister_power_fail_range(buf.data());
  gpm::persist(buf.data(), buf.size());  // plain fence once unregistered
  EXPECT_EQ(buf[100], 2);
  EXPECT_EQ(buf[5099], 2);
  EXPECT_EQ(buf[5100], 1);
}

__global__ void libgpm_kernel(int* region, int n) {
  const auto i = static_cast<int>(gpm::tile_index());
  if (i < n) {
    region[i] = n - i;
    gpm_persist();
  }
}

TEST(Persist, LibGpmCompatibilityApi) {
  gpm::test::scratch_dirs d("libgpm");
  const std::string path = d.pool_path("region.pool");
  const int n = 5000;
  gpm_persist_begin();
  int* region = static_cast<int*>(gpm_map(path.c_str(), n * sizeof(int), true));
  ASSERT_NE(region, nullptr);
  gpm::launch(libgpm_kernel, (n + 127) / 128, 128, 0, nullptr, region, n);
  gpm::test::sync_ok();
  gpm_persist_end();
  gpm_unmap(path.c_str(), region, n * sizeof(int));
  int* again = static_cast<int*>(gpm_map(path.c_str(), n * sizeof(int), false));
  ASSERT_NE(again, nullptr);
  std::vector<int> host(n);
  ASSERT_EQ(cudaMemcpy(host.data(), again, n * sizeof(int), cudaMemcpyDefault), cudaSuccess);
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], n - i);
  EXPECT_EQ(gpm_map(path.c_str(), n * sizeof(int), false), nullptr) << "mapped twice";
  EXPECT_EQ(gpm_map((d.pm_dir() + "/absent.pool").c_str(), 64, false), nullptr);
  gpm_unmap(path.c_str(), again, n * sizeof(int));
}

// No C++ exception may cross the C functions (a null path used to abort the process), and a
// failed create leaves no file behind (a retry used to find "already exists").
TEST(Persist, LibGpmCompatFailsCleanlyAndLeavesNothing) {
  gpm::test::scratch_dirs d("libgpm-bad");
  const std::string path = d.pool_path("region.pool");
  EXPECT_EQ(gpm_map(nullptr, 64, true), nullptr);
  EXPECT_EQ(gpm_map(nullptr, 64, false), nullptr);
  EXPECT_EQ(gpm_map("", 64, true), nullptr);
  gpm_unmap(nullptr, nullptr, 64);
  gpm_unmap(path.c_str(), nullptr, 64);  // not mapped: a message, nothing else
  EXPECT_EQ(gpm_map(path.c_str(), 0, true), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed create left a pool file";
  EXPECT_EQ(gpm_map(path.c_str(), ~std::size_t{0}, true), nullptr);
  EXPECT_EQ(gpm_map(path.c_str(), ~std::size_t{0} - 4096, true), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed create left a pool file";
  void* region = gpm_map(path.c_str(), 64, true);  // the retry works
  ASSERT_NE(region, nullptr);
  gpm_unmap(path.c_str(), region, 64);
}

}  // namespace
