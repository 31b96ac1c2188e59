// The crash-image checker fed by kernels: on the host emulator, a kernel's gpm::persist(p, len)
// and gpm::persist() reach the checker's durability model like host code's, so the images at a
// host crash point after the launch lose exactly the lines no thread persisted. On a GPU, kernels
// do not feed the model (docs/crash-checking.md), so the test is skipped there.
#include <gpm/config.hpp>
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "scratch_pool.hpp"

namespace {

constexpr unsigned kLines = 16;
constexpr std::uint64_t kLine = 64;

// Thread i stores `base + i` into line i; even threads persist their line, odd ones do not, and
// with `fence` thread 0 then makes everything durable with a persist naming no range.
__global__ void store_lines(gpm::pool_ref pool, std::uint64_t off, char base, bool fence) {
  const unsigned i = threadIdx.x;
  char* line = pool.ptr<char>(off + i * kLine);
  line[0] = static_cast<char>(base + i);
  if (i % 2 == 0) gpm::persist(line, 1);
  __syncthreads();
  if (fence && i == 0) gpm::persist();
}

// What a module's recovery kernel does: store and persist.
__global__ void persist_word(unsigned* word) {
  *word = 1;
  gpm::persist(word, sizeof *word);
  gpm::persist();
}

TEST(PoolCrashImage, KernelsOnTheEmulatorFeedTheModel) {
  if constexpr (!GPM_BACKEND_HOST) {
    GTEST_SKIP() << "kernels on a GPU do not feed the crash-image checker's model";
  }
  gpm::test::scratch_dirs d("crash-image-kernel");
  gpm::pool_options po = gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir());
  po.directory_capacity = 8;  // a small pool: each of the 257 images is written whole
  gpm::pool p = gpm::pool::create("k.pool", 64 << 10, "crash-image", po);
  const std::uint64_t off = p.allocate("lines", kLines * kLine);
  char want_even = 0;  // what every even line must hold in every image
  char want_odd = 0;   // what every odd line must hold (0: either the old or the new value)
  gpm::crash_image_options o;
  o.image_path = d.pool_path("image.pool");
  gpm::crash_image_checker checker(
      p.host_ptr<char>(0), p.size(),
      [&](const std::string& path) -> std::string {
        // A recovery may run kernels: their persists, on the emulator's worker threads, are
        // not the workload's and must not reach (or wait for) the model.
        gpm::device_buffer<unsigned> word(1);
        gpm::launch(persist_word, 1, 1, 0, nullptr, word.data());
        if (cudaDeviceSynchronize() != cudaSuccess) return "the recovery kernel failed";
        std::ifstream in(path, std::ios::binary);
        const std::vector<char> image{std::istreambuf_iterator<char>(in),
                                      std::istreambuf_iterator<char>()};
        for (unsigned i = 0; i < kLines; ++i) {
          const char got = image.at(off + i * kLine);
          const char want = i % 2 == 0 ? want_even : want_odd;
          if (want != 0 && got != static_cast<char>(want + i)) {
            return "line " + std::to_string(i) + " holds " + std::to_string(got);
          }
        }
        return "";
      },
      o);
  want_even = 1;
  gpm::launch(store_lines, 1, kLines, 0, nullptr, p.ref(), off, char{1}, false);
  gpm::test::sync_ok();
  gpm::crash_point("test.after_launch");
  ASSERT_FALSE(checker.failure()) << checker.failure()->describe();
  EXPECT_EQ(checker.stats().most_dirty_lines, kLines / 2);
  EXPECT_EQ(checker.stats().images, 1u << (kLines / 2));  // every subset of the odd lines

  want_even = want_odd = 40;
  gpm::launch(store_lines, 1, kLines, 0, nullptr, p.ref(), off, char{40}, true);
  gpm::test::sync_ok();
  gpm::crash_point("test.after_fence");
  ASSERT_FALSE(checker.failure()) << checker.failure()->describe();
  EXPECT_EQ(checker.stats().images, (1u << (kLines / 2)) + 1);  // nothing dirty: one image
}

}  // namespace
