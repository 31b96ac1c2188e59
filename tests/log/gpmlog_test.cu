// Tests of the paper's logging C API (gpmlog.hpp): create both kinds, use them from kernels,
// close, reopen by path (the kind is found from the file), and failures reported as nullptr.
#include <gpm/compat/gpmlog.hpp>

#include <filesystem>

#include "scratch_pool.hpp"

namespace {

constexpr int kBlocks = 2, kThreads = 64, kParts = 4;

// Per thread: an HCL insert / read / size / remove round trip, and a conv insert into its
// partition (t % 4), or into its block's default partition for odd threads.
__global__ void use_logs(gpmlog* hcl, gpmlog* conv, std::uint32_t* status) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  std::uint64_t v = t * 3 + 1, r = 0;
  std::uint32_t fail = 0;
  if (gpmlog_insert(hcl, &v, sizeof v) != 0) fail |= 1;
  if (gpmlog_read(hcl, &r, sizeof r) != 0 || r != v) fail |= 2;
  if (gpmlog_size(hcl) != gpm::hcl_log::entry_footprint(sizeof v) || gpmlog_is_empty(hcl)) {
    fail |= 4;
  }
  if (gpmlog_remove(hcl, sizeof v) != 0 || !gpmlog_is_empty(hcl)) fail |= 8;
  if (gpmlog_insert(hcl, &v, sizeof v) != 0 || gpmlog_clear(hcl) != 0) fail |= 16;
  if (gpmlog_read(hcl, &r, sizeof r) != static_cast<int>(gpm::log_status::empty)) fail |= 32;
  const int partition = t % 2 == 0 ? static_cast<int>(t % kParts) : -1;
  if (gpmlog_insert(conv, &v, sizeof v, partition) != 0) fail |= 64;
  status[t] = fail;
}

__global__ void conv_sizes(gpmlog* conv, std::uint32_t* out) {
  out[threadIdx.x] = static_cast<std::uint32_t>(gpmlog_size(conv, threadIdx.x));
}

TEST(GpmlogApi, BothKindsFromKernelsAndReopenByPath) {
  gpm::test::scratch_dirs d("gpmlog");
  const std::string hcl_path = d.pool_path("hcl.log"), conv_path = d.pool_path("conv.log");
  gpmlog* hcl = gpmlog_create_hcl(hcl_path.c_str(), 1 << 20, kBlocks, kThreads);
  gpmlog* conv = gpmlog_create_conv(conv_path.c_str(), 1 << 16, kParts);
  ASSERT_NE(hcl, nullptr);
  ASSERT_NE(conv, nullptr);
  gpm::device_buffer<std::uint32_t> status(kBlocks * kThreads);
  gpm::launch(use_logs, kBlocks, kThreads, 0, nullptr, hcl, conv, status.data());
  for (std::uint32_t s : gpm::test::statuses(status)) ASSERT_EQ(s, 0u);
  gpmlog_close(hcl);
  gpmlog_close(conv);

  conv = gpmlog_open(conv_path.c_str());
  ASSERT_NE(conv, nullptr);
  gpm::device_buffer<std::uint32_t> sizes(kParts);
  gpm::launch(conv_sizes, 1, kParts, 0, nullptr, conv, sizes.data());
  const auto n = gpm::test::statuses(sizes);
  // Even threads used partition t % 4 (0 or 2); odd threads their block's (0 or 1).
  const std::uint64_t e = gpm::conv_log::entry_footprint(8);
  EXPECT_EQ(n[0], kThreads * e);  // half the even threads, and the odd ones of block 0
  EXPECT_EQ(n[1], kThreads / 2 * e);
  EXPECT_EQ(n[2], kThreads / 2 * e);
  EXPECT_EQ(n[3], 0u);
  EXPECT_EQ(gpmlog_clear_all(conv), 0);
  gpm::launch(conv_sizes, 1, kParts, 0, nullptr, conv, sizes.data());
  for (std::uint32_t s : gpm::test::statuses(sizes)) EXPECT_EQ(s, 0u);
  gpmlog_close(conv);

  hcl = gpmlog_open(hcl_path.c_str());
  ASSERT_NE(hcl, nullptr);
  gpmlog_close(hcl);
}

// No C++ exception may cross the C functions, and a failed create leaves no file behind.
TEST(GpmlogApi, BadArgumentsFailCleanlyAndLeaveNothing) {
  gpm::test::scratch_dirs d("gpmlog-bad");
  const std::string path = d.pool_path("x.log");
  EXPECT_EQ(gpmlog_create_hcl(nullptr, 1 << 20, 1, 32), nullptr);
  EXPECT_EQ(gpmlog_create_conv(nullptr, 1 << 20, 2), nullptr);
  EXPECT_EQ(gpmlog_open(nullptr), nullptr);
  EXPECT_EQ(gpmlog_create_conv(path.c_str(), ~std::size_t{0}, 1), nullptr);
  EXPECT_EQ(gpmlog_create_hcl(path.c_str(), ~std::size_t{0}, 1, 1), nullptr);
  // Too small for one entry per thread: the log is refused after its pool was made.
  EXPECT_EQ(gpmlog_create_hcl(path.c_str(), 8, 4, 32), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed create left a pool file";
  gpmlog* log = gpmlog_create_conv(path.c_str(), 4096, 2);  // the retry works
  ASSERT_NE(log, nullptr);
  gpmlog_close(log);
}

TEST(GpmlogApi, FailuresReturnNull) {
  gpm::test::scratch_dirs d("gpmlog-fail");
  EXPECT_EQ(gpmlog_open(d.pool_path("missing.log").c_str()), nullptr);
  EXPECT_EQ(gpmlog_create_hcl(d.pool_path("a.log").c_str(), 1 << 20, 0, 32), nullptr);
  EXPECT_EQ(gpmlog_create_conv(d.pool_path("b.log").c_str(), 1 << 20, 0), nullptr);
  gpmlog* log = gpmlog_create_conv(d.pool_path("c.log").c_str(), 4096, 2);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(gpmlog_create_conv(d.pool_path("c.log").c_str(), 4096, 2), nullptr);  // exists
  gpmlog_close(log);
  EXPECT_EQ(gpmlog_clear_all(log), -1);  // closed
}

}  // namespace
