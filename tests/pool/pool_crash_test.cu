// Crash tests of the pool with real process crashes (SIGKILL at random moments and at injected
// crash points), on both backends:
//  - named-object allocation and free are crash-atomic and leak no space,
//  - recovery is idempotent (a crash during recovery, then recovery again, gives the same pool),
//  - an unclean exit is detected,
//  - snapshots survive crashes at every step and restore a state the program snapshotted,
//  - a GPU kernel killed mid-run leaves every chunk it published (persist, then publish a
//    progress counter) intact: the GPM persistence model.
// Trials: GPMKIT_CRASH_TRIALS (a few in CI, thousands in the crash-long label).
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/publish.cuh>
#include <gpm/pool/pool.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

constexpr char kLayout[] = "crash-test";

gpm::pool_options options_for(const gpm::test::scenario_args& a) {
  gpm::pool_options o;
  o.pm_dir = a.pm_dir;
  o.snapshot_dir = a.snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  gpm::pool_options o;
  o.pm_dir = d.pm_dir();
  o.snapshot_dir = d.snapshot_dir();
  o.notice = [](const std::string&) {};
  return o;
}

// ---- allocation and free --------------------------------------------------------------------

char pattern_of(const std::string& name) { return static_cast<char>(0x40 + name.back() % 16); }

// Allocates, fills, verifies and frees named objects at random until killed.
GPM_CRASH_SCENARIO(pool_churn) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  std::mt19937_64 rng(args.seed);
  gpm::test::report_progress(args, "ready");
  for (;;) {
    const std::string name = "obj-" + std::to_string(rng() % 16);
    if (auto o = p.find(name)) {
      const char* data = p.host_ptr<char>(o->offset);
      for (std::uint64_t i = 0; i < o->bytes; ++i) {
        if (data[i] != pattern_of(name) && data[i] != 0) return 5;  // the child sees corruption
      }
      p.free(name);
    } else {
      const std::uint64_t bytes = 1 + rng() % 65536;
      const std::uint64_t off = p.allocate(name, bytes, 128u << (rng() % 4));
      std::memset(p.host_ptr<char>(off), pattern_of(name), bytes);
      gpm::persist(p.host_ptr<char>(off), bytes);
    }
  }
}

// The invariant after recovery: a consistent directory, every object's bytes either zero (not
// yet filled) or its pattern, and all space free once the objects are freed.
void check_recovered_pool(const gpm::test::scratch_dirs& d, const std::string& what) {
  const gpm::pool_check c = gpm::pool::check("churn.pool", options_for(d));
  // The check runs before recovery: it may note a pending operation, but never a problem.
  ASSERT_TRUE(c.ok) << what << ": " << (c.problems.empty() ? "" : c.problems.front());
  gpm::pool p = gpm::pool::open("churn.pool", kLayout, options_for(d));
  EXPECT_FALSE(p.was_clean_shutdown()) << what;
  for (const gpm::pool_object& o : p.objects()) {
    const char* data = p.host_ptr<char>(o.offset);
    for (std::uint64_t i = 0; i < o.bytes; ++i) {
      ASSERT_TRUE(data[i] == 0 || data[i] == pattern_of(o.name))
          << what << ": object " << o.name << " byte " << i;
    }
  }
  for (const gpm::pool_object& o : p.objects()) p.free(o.name);
  const gpm::pool_info info = p.info();
  ASSERT_EQ(info.free_bytes, info.heap_bytes) << what;
  // The whole heap must be allocatable in one piece: no phantom extent survives.
  p.allocate("everything", info.heap_bytes);
}

const char* const kDirectoryCrashPoints[] = {
    "pool.allocate.announced", "pool.allocate.entry_torn", "pool.allocate.entry_written",
    "pool.free.announced",     "pool.free.entry_cleared",
};

TEST(PoolCrash, AllocationAndFreeAreCrashAtomic) {
  const int trials = gpm::test::crash_trials(24);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("churn");
    gpm::pool::create("churn.pool", 8 << 20, kLayout, options_for(d)).close();
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    gpm::test::kill_policy policy;
    std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    if (t % 2 == 0) {
      policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 40), "ready");
      what += ", killed at a random time";
    } else {
      const char* point = kDirectoryCrashPoints[(t / 2) % std::size(kDirectoryCrashPoints)];
      policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(1 + rng() % 20));
      what += std::string(", crash point ") + point;
    }
    const gpm::test::child_result r =
        gpm::test::run_child("pool_churn", d.args("churn.pool", seed), policy);
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    check_recovered_pool(d, what);
  }
}

// Opens the pool (which runs recovery) and exits.
GPM_CRASH_SCENARIO(recover_only) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  return 0;
}

TEST(PoolCrash, RecoveryIsIdempotent) {
  const int trials = gpm::test::crash_trials(6);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("idem");
    gpm::pool::create("churn.pool", 8 << 20, kLayout, options_for(d)).close();
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const char* point = t % 2 == 0 ? "pool.allocate.entry_torn" : "pool.free.announced";
    const auto r =
        gpm::test::run_child("pool_churn", d.args("churn.pool", seed),
                             gpm::test::kill_at(std::string(point) + ":" + std::to_string(2 + t)));
    ASSERT_TRUE(r.killed) << r.describe();
    // Two copies of the crashed pool: one recovered straight, one whose recovery crashes first.
    std::filesystem::copy_file(d.pool_path("churn.pool"), d.pool_path("copy.pool"));
    const auto r2 = gpm::test::run_child("recover_only", d.args("churn.pool", seed),
                                         gpm::test::kill_at("pool.recover.fixed"));
    ASSERT_TRUE(r2.killed) << "recovery did not reach its crash point: " << r2.describe();
    gpm::pool a = gpm::pool::open("churn.pool", kLayout, options_for(d));
    gpm::pool b = gpm::pool::open("copy.pool", kLayout, options_for(d));
    const auto oa = a.objects(), ob = b.objects();
    ASSERT_EQ(oa.size(), ob.size()) << "trial " << t;
    for (std::size_t i = 0; i < oa.size(); ++i) {
      EXPECT_EQ(oa[i].name, ob[i].name);
      EXPECT_EQ(oa[i].offset, ob[i].offset);
      EXPECT_EQ(oa[i].bytes, ob[i].bytes);
      EXPECT_EQ(
          std::memcmp(a.host_ptr<char>(oa[i].offset), b.host_ptr<char>(ob[i].offset), oa[i].bytes),
          0);
    }
  }
}

// Exits without closing the pool, as a crashed program would.
GPM_CRASH_SCENARIO(exit_without_close) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  p.allocate("written", 64);
  std::fflush(nullptr);
  _exit(0);
}

TEST(PoolCrash, UncleanShutdownIsDetected) {
  gpm::test::scratch_dirs d("unclean");
  gpm::pool::create("u.pool", 1 << 20, kLayout, options_for(d)).close();
  const auto r = gpm::test::run_child("exit_without_close", d.args("u.pool", 1), {});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  gpm::pool p = gpm::pool::open("u.pool", kLayout, options_for(d));
  EXPECT_FALSE(p.was_clean_shutdown());
  EXPECT_TRUE(p.find("written"));
  p.close();
  EXPECT_TRUE(gpm::pool::open("u.pool", kLayout, options_for(d)).was_clean_shutdown());
}

// ---- snapshots ------------------------------------------------------------------------------

constexpr std::uint64_t kSnapPages = 64;

// Which pages generation g rewrites, and with what byte.
bool touches(std::uint64_t g, std::uint64_t page) {
  return page == g % kSnapPages || ((g * 0x9e3779b97f4a7c15ull) >> (page % 61)) % 3 == 0;
}
char fill_of(std::uint64_t g, std::uint64_t page) {
  return static_cast<char>(1 + (g * 31 + page) % 250);
}

// Generations of page rewrites, each snapshotted and then reported as committed.
GPM_CRASH_SCENARIO(snapshot_churn) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  char* data = p.host_ptr<char>(p.get("data").offset);
  auto* gen = p.host_ptr<std::uint64_t>(p.get("gen").offset);
  gpm::test::report_progress(args, "ready");
  for (std::uint64_t g = *gen + 1;; ++g) {
    for (std::uint64_t page = 0; page < kSnapPages; ++page) {
      if (touches(g, page)) std::memset(data + page * 4096, fill_of(g, page), 4096);
    }
    *gen = g;
    gpm::persist(gen, sizeof *gen);
    p.snapshot();
    gpm::test::report_progress(args, "committed " + std::to_string(g));
  }
}

const char* const kSnapshotCrashPoints[] = {
    "snapshot.first.written", "snapshot.journal.written", "snapshot.committed",
    "snapshot.applying",      "snapshot.applied",
};

TEST(PoolCrash, SnapshotsSurviveCrashesAtEveryStep) {
  const int trials = gpm::test::crash_trials(20);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("snap");
    {
      gpm::pool p = gpm::pool::create("s.pool", 1 << 20, kLayout, options_for(d));
      p.allocate("data", kSnapPages * 4096, 4096);
      p.allocate("gen", 8);
    }
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    gpm::test::kill_policy policy;
    std::string what = "trial " + std::to_string(t);
    if (t % 2 == 0) {
      policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 60), "ready");
      what += ", killed at a random time";
    } else {
      const char* point = kSnapshotCrashPoints[(t / 2) % std::size(kSnapshotCrashPoints)];
      const int n = std::strcmp(point, "snapshot.first.written") == 0 ? 1 : 1 + rng() % 8;
      policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(n));
      what += std::string(", crash point ") + point;
    }
    const auto r = gpm::test::run_child("snapshot_churn", d.args("s.pool", seed), policy);
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    std::uint64_t reported = 0;
    for (const std::string& line : r.progress) {
      if (line.rfind("committed ", 0) == 0) reported = std::stoull(line.substr(10));
    }
    // A reboot empties tmpfs: only the snapshot is left.
    std::filesystem::remove(d.pool_path("s.pool"));
    std::optional<gpm::pool> p;
    try {
      p.emplace(gpm::pool::open("s.pool", kLayout, options_for(d)));
    } catch (const gpm::error& e) {
      ASSERT_EQ(reported, 0u) << what << ": snapshot " << reported
                              << " was reported committed but cannot be restored: " << e.what();
      continue;
    }
    const std::uint64_t g = *p->host_ptr<std::uint64_t>(p->get("gen").offset);
    ASSERT_TRUE(g == reported || g == reported + 1)
        << what << ": restored generation " << g << ", last reported " << reported;
    const char* data = p->host_ptr<char>(p->get("data").offset);
    for (std::uint64_t page = 0; page < kSnapPages; ++page) {
      char want = 0;
      for (std::uint64_t k = g; k >= 1; --k) {
        if (touches(k, page)) {
          want = fill_of(k, page);
          break;
        }
      }
      for (std::uint64_t i = 0; i < 4096; i += 511) {
        ASSERT_EQ(data[page * 4096 + i], want) << what << ": generation " << g << " page " << page;
      }
    }
  }
}

// ---- a GPU kernel killed mid-run ------------------------------------------------------------

#if GPM_BACKEND_CUDA
constexpr std::uint32_t kChunkWords = 1u << 21;  // 8 MiB per launch on a GPU
#else
constexpr std::uint32_t kChunkWords = 1u << 15;  // 128 KiB per launch on the emulator
#endif
constexpr std::uint32_t kChunks = 32;

__host__ __device__ inline std::uint32_t word_value(std::uint64_t round, std::uint32_t chunk,
                                                    std::uint32_t i) {
  return static_cast<std::uint32_t>((round * 0x9e3779b1u) ^ (chunk * 0x85ebca6bu) ^
                                    (i * 0xc2b2ae35u)) |
         1u;
}

// Writes one chunk and persists it; the last block to finish publishes `publish` as progress.
__global__ void write_and_publish(gpm::pool_ref pool, std::uint64_t data_off,
                                  std::uint64_t progress_off, unsigned* blocks_done,
                                  std::uint64_t round, std::uint32_t chunk, std::uint64_t publish) {
  std::uint32_t* data =
      pool.ptr<std::uint32_t>(data_off) + static_cast<std::uint64_t>(chunk) * kChunkWords;
  for (std::uint64_t i : gpm::grid_stride(kChunkWords)) {
    data[i] = word_value(round, chunk, i);
  }
  gpm::persist();
  gpm::publish_when_grid_done(blocks_done, pool.ptr<std::uint64_t>(progress_off), publish);
}

GPM_CRASH_SCENARIO(kernel_progress) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  const std::uint64_t data_off = p.get("data").offset;
  const std::uint64_t progress_off = p.get("progress").offset;
  gpm::device_buffer<unsigned> done(1);
  done.fill_bytes(0);
  const gpm::pool_ref ref = p.ref();
  gpm::test::report_progress(args, "ready");
  for (std::uint64_t round = 0;; ++round) {
    for (std::uint32_t c = 0; c < kChunks; ++c) {
      gpm::launch(write_and_publish, 64, 256, 0, nullptr, ref, data_off, progress_off, done.data(),
                  round, c, round * kChunks + c + 1);
    }
    gpm::check_cuda(cudaDeviceSynchronize(), "round");
  }
}

TEST(PoolCrash, KernelKilledMidRunKeepsPublishedChunks) {
  const int trials = gpm::test::crash_trials(8);
  int with_progress = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("kernel");
    {
      gpm::pool p = gpm::pool::create(
          "k.pool", static_cast<std::uint64_t>(kChunks) * kChunkWords * 4 + (2 << 20), kLayout,
          options_for(d));
      p.allocate("data", static_cast<std::uint64_t>(kChunks) * kChunkWords * 4, 4096);
      p.allocate("progress", 8);
    }
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const double delay = 5 + static_cast<double>(rng() % 400);
    const auto r = gpm::test::run_child("kernel_progress", d.args("k.pool", seed),
                                        gpm::test::kill_after_ms(delay, "ready"));
    ASSERT_TRUE(r.killed_by_parent) << r.describe();
    gpm::pool p = gpm::pool::open("k.pool", kLayout, options_for(d));
    const std::uint64_t published = *p.host_ptr<std::uint64_t>(p.get("progress").offset);
    const std::uint32_t* data = p.host_ptr<std::uint32_t>(p.get("data").offset);
    with_progress += published > 0;
    const std::uint64_t in_flight = published % kChunks;  // the chunk being rewritten
    for (std::uint32_t c = 0; c < kChunks; ++c) {
      if (published < c + 1 || (c == in_flight && published >= kChunks)) continue;
      const std::uint64_t round = (published - 1 - c) / kChunks;
      for (std::uint32_t i = 0; i < kChunkWords; ++i) {
        ASSERT_EQ(data[static_cast<std::uint64_t>(c) * kChunkWords + i], word_value(round, c, i))
            << "trial " << t << " (killed after " << delay << " ms): chunk " << c << " word " << i
            << " of published round " << round << ", progress " << published;
      }
    }
  }
  EXPECT_GT(with_progress, 0) << "no trial ran long enough to publish anything";
}

}  // namespace
