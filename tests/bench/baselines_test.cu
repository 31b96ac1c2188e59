// Tests of gpmbench's shared pieces that every workload relies on: the CPU team, the paper's
// baseline persistence paths (gpm-ndp, cap-mm, cap-fs) and the Zipf key generator.
#include <gpm/platform/kernel.cuh>

#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "gpmbench/baselines.hpp"
#include "gpmbench/zipf.hpp"

namespace {

TEST(CpuTeam, CoversEveryIndexOnceAcrossCalls) {
  gpmbench::cpu_team team(3);
  EXPECT_EQ(team.size(), 3u);
  for (std::uint64_t n : {0ull, 1ull, 2ull, 7ull, 1000ull}) {
    std::vector<std::atomic<int>> hits(n);
    team.parallel_for(n, [&](std::uint64_t b, std::uint64_t e) {
      for (std::uint64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (std::uint64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
  }
}

TEST(CpuTeam, RethrowsAPiecesException) {
  gpmbench::cpu_team team(2);
  EXPECT_THROW(team.parallel_for(10,
                                 [](std::uint64_t b, std::uint64_t) {
                                   if (b == 0) throw std::runtime_error("piece failed");
                                 }),
               std::runtime_error);
  int calls = 0;  // the team still works afterwards
  team.parallel_for(1, [&](std::uint64_t, std::uint64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

std::vector<unsigned char> pattern(std::size_t n) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 7 + 3);
  return v;
}

TEST(Baselines, CapMmCopiesDeviceDataThroughASmallStagingBuffer) {
  const std::vector<unsigned char> want = pattern(10000);
  gpm::device_buffer<unsigned char> src(want.size());
  src.copy_from_host(want.data(), want.size());
  std::vector<unsigned char> dst(want.size(), 0);
  gpmbench::cpu_team team(2);
  gpmbench::cap_mm cap(team, 4096);  // three pieces, the last partial
  const gpm::stream s;
  cap.persist(dst.data(), src.data(), want.size(), s);
  EXPECT_EQ(dst, want);
  EXPECT_EQ(cap.bytes_persisted(), want.size());
}

TEST(Baselines, CapFsWritesAtOffsetsAndSyncs) {
  const gpm::test::scratch_dirs dirs("baselines");
  const std::vector<unsigned char> want = pattern(9000);
  gpm::device_buffer<unsigned char> src(want.size());
  src.copy_from_host(want.data(), want.size());
  const std::string path = dirs.pm_dir() + "/cap.dat";
  {
    gpmbench::cap_fs cap(path, 4096);
    const gpm::stream s;
    cap.write(100, src.data(), want.size(), s);
    cap.sync();
    EXPECT_EQ(cap.bytes_persisted(), want.size());
    std::ifstream in(path, std::ios::binary);
    const std::vector<unsigned char> got((std::istreambuf_iterator<char>(in)), {});
    ASSERT_EQ(got.size(), 100 + want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 100));
  }
  EXPECT_FALSE(std::ifstream(path).good()) << "cap_fs removes its file";
}

TEST(Baselines, CapFsNamesAFileItCannotCreate) {
  try {
    gpmbench::cap_fs cap("/nonexistent-dir/x.dat", 4096);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.dat"), std::string::npos);
  }
}

TEST(Baselines, NdpCountsTheBytesItWroteBack) {
  std::vector<unsigned char> data = pattern(5000);
  gpmbench::cpu_team team(2);
  gpmbench::ndp_persister ndp(team);
  ndp.persist(data.data() + 3, 4000);  // unaligned start and end
  EXPECT_EQ(ndp.bytes_persisted(), 4000u);
  EXPECT_EQ(data, pattern(5000)) << "writing back lines must not change them";
}

TEST(Zipf, RejectsParametersYcsbWouldNot) {
  EXPECT_THROW(gpmbench::zipf_distribution(0, 0.99), std::invalid_argument);
  EXPECT_THROW(gpmbench::zipf_distribution(10, 1.0), std::invalid_argument);
  EXPECT_THROW(gpmbench::zipf_distribution(10, -0.1), std::invalid_argument);
}

TEST(Zipf, ZetaTailApproximationMatchesTheExactSum) {
  const std::uint64_t n = 3u << 20;  // beyond the exactly summed prefix
  double exact = 0;
  for (std::uint64_t i = 1; i <= n; ++i) exact += std::pow(static_cast<double>(i), -0.99);
  EXPECT_NEAR(gpmbench::zipf_distribution::zeta(n, 0.99), exact, exact * 1e-9);
}

TEST(Zipf, DrawsFollowZipfsLawAndStayInRange) {
  const std::uint64_t items = 100000, draws = 400000;
  const gpmbench::zipf_distribution z(items, 0.99);
  std::vector<std::uint64_t> rank_count(items, 0), key_count(items, 0);
  for (std::uint64_t i = 0; i < draws; ++i) {
    const std::uint64_t k = z.key(42, i);
    ASSERT_LT(k, items);
    ++key_count[k];
    ++rank_count[z.rank(static_cast<double>(gpm::mix64(i) >> 11) * 0x1.0p-53)];
  }
  // P(rank 0) = 1 / zeta(n, theta); Gray's method approximates the tail, not the head.
  const double p0 = 1 / gpmbench::zipf_distribution::zeta(items, 0.99);
  EXPECT_NEAR(static_cast<double>(rank_count[0]) / draws, p0, p0 * 0.05);
  // The most popular key is hit about as often as rank 0, and it is not key 0 (scrambled).
  const auto hottest = std::max_element(key_count.begin(), key_count.end()) - key_count.begin();
  EXPECT_NEAR(static_cast<double>(key_count[hottest]) / draws, p0, p0 * 0.1);
  EXPECT_NE(hottest, 0);
  EXPECT_EQ(z.key(42, 7), z.key(42, 7));
  EXPECT_NE(z.key(42, 7), z.key(43, 7));
}

TEST(Zipf, ThetaZeroIsUniform) {
  const std::uint64_t items = 16, draws = 160000;
  const gpmbench::zipf_distribution z(items, 0);
  std::vector<std::uint64_t> count(items, 0);
  for (std::uint64_t i = 0; i < draws; ++i) ++count[z.key(1, i)];
  for (const std::uint64_t c : count) EXPECT_NEAR(static_cast<double>(c), draws / 16.0, 600);
}

}  // namespace
