// Crash-image tests of the pool allocator (gpm/platform/crash_image.hpp). A workload of
// allocations, fills, frees and root updates runs under the checker; at every crash point of the
// pool's directory protocol the checker writes each crash image (the persisted lines plus any
// subset of the unpersisted ones), opens it (which runs recovery) and checks it against what the
// workload knows is committed. With every persist site present no image fails; with any one of
// the allocator's persist sites disabled (a mutation: the persist deleted), some image must fail.
// docs/crash-checking.md holds the table of sites and the tests that catch their removal.
// Trials: GPMKIT_CRASH_TRIALS workloads with different seeds (2 by default, more in crash-long).
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "scratch_pool.hpp"

namespace {

constexpr char kLayout[] = "crash-image";
constexpr char kPool[] = "work.pool";
constexpr std::uint64_t kPoolBytes = 64 << 10;  // a small heap, so freed space is reused
constexpr std::uint32_t kDirectory = 8;

const std::vector<std::string> kPoolCrashPoints = {
    "pool.allocate.announced", "pool.allocate.entry_torn", "pool.allocate.entry_written",
    "pool.free.announced",     "pool.free.entry_cleared",  "pool.recover.fixed",
    "workload.between_ops",
};

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  gpm::pool_options o = gpm::test::image_options(d, kDirectory);
  o.gpu = gpm::gpu_mapping::none;
  return o;
}

char fill_of(const std::string& name) { return static_cast<char>(0x41 + name.back() % 16); }

// What the workload knows about the pool: the committed objects and root, and the operation in
// flight (a crash image may show it done or not done, never half done).
struct pool_model {
  struct object {
    std::uint64_t offset, bytes;
    bool filled;  // its fill was persisted: every byte is fill_of(name), else every byte is 0
  };
  enum class op { none, allocate, free };
  std::map<std::string, object> objects;
  std::pair<std::uint64_t, std::uint64_t> root{0, 0};
  op pending = op::none;
  std::string pending_name;
};

// "" if the bytes of object `name` are all `want`, else which byte is not.
std::string bytes_are(const gpm::pool& p, const gpm::pool_object& o, char want) {
  const char* data = p.host_ptr<char>(o.offset);
  for (std::uint64_t i = 0; i < o.bytes; ++i) {
    if (data[i] != want) {
      return "object \"" + o.name + "\" byte " + std::to_string(i) + " is " +
             std::to_string(static_cast<int>(data[i])) + ", not " +
             std::to_string(static_cast<int>(want));
    }
  }
  return "";
}

// Recovers the image (open) and checks it against the model: every committed object is there
// with its place and bytes, nothing else is except the one being allocated (zero-filled), and
// the root is the committed one.
std::string check_image(const std::string& image, const gpm::pool_options& o, const pool_model& m) {
  gpm::pool p = gpm::pool::open(image, kLayout, o);
  std::set<std::string> seen;
  for (const gpm::pool_object& obj : p.objects()) {
    seen.insert(obj.name);
    const auto it = m.objects.find(obj.name);
    if (it == m.objects.end()) {
      if (m.pending != pool_model::op::allocate || obj.name != m.pending_name) {
        return "object \"" + obj.name + "\" exists but was never allocated or was freed";
      }
      if (std::string bad = bytes_are(p, obj, 0); !bad.empty()) {
        return bad + " (the object being allocated must read zero)";
      }
      continue;
    }
    if (obj.offset != it->second.offset || obj.bytes != it->second.bytes) {
      return "object \"" + obj.name + "\" moved or changed size";
    }
    if (std::string bad = bytes_are(p, obj, it->second.filled ? fill_of(obj.name) : 0);
        !bad.empty()) {
      return bad;
    }
  }
  for (const auto& [name, obj] : m.objects) {
    if (!seen.contains(name) && (m.pending != pool_model::op::free || name != m.pending_name)) {
      return "committed object \"" + name + "\" is missing";
    }
  }
  if (p.root() != m.root) {
    return "the root is (" + std::to_string(p.root().first) + ", " +
           std::to_string(p.root().second) + "), not the committed (" +
           std::to_string(m.root.first) + ", " + std::to_string(m.root.second) + ")";
  }
  return "";
}

// Allocates, fills, frees and moves the root at random, keeping `m` up to date, for `ops`
// operations on an empty pool.
void run_workload(gpm::pool& p, pool_model& m, std::uint64_t seed, int ops) {
  ASSERT_TRUE(p.objects().empty());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; ++i) {
    // A crash between two operations: what the last one (or recovery) left must be durable.
    gpm::crash_point("workload.between_ops");
    const std::string name = "obj-" + std::to_string(rng() % kDirectory);
    if (rng() % 5 == 0) {
      // The root names some object (or nothing); set_root has no crash point of its own, so the
      // next operation's crash points check it.
      const auto it = m.objects.begin();
      m.root = it == m.objects.end() ? std::pair<std::uint64_t, std::uint64_t>{0, 0}
                                     : std::pair{it->second.offset, it->second.bytes};
      p.set_root(m.root.first, m.root.second);
    } else if (m.objects.contains(name)) {
      m.pending = pool_model::op::free;
      m.pending_name = name;
      p.free(name);
      m.objects.erase(name);
    } else {
      const std::uint64_t bytes = 1 + rng() % 6000;
      const std::uint64_t alignment = 128u << (rng() % 3);
      m.pending = pool_model::op::allocate;
      m.pending_name = name;
      std::uint64_t offset = 0;
      try {
        offset = p.allocate(name, bytes, alignment);
      } catch (const gpm::error& e) {
        ASSERT_EQ(e.code(), gpm::errc::out_of_memory) << e.what();
        m.pending = pool_model::op::none;
        continue;
      }
      m.objects[name] = {offset, bytes, false};
      m.pending = pool_model::op::none;
      std::memset(p.host_ptr<char>(offset), fill_of(name), bytes);
      gpm::persist(p.host_ptr<char>(offset), bytes);
      m.objects[name].filled = true;
    }
    m.pending = pool_model::op::none;
  }
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
};

// Arms a checker that adopts the pool's mapping from its creation, then runs the workload.
run_result check_workload(std::uint64_t seed, int ops, const std::string& disabled_site = "",
                          std::size_t exhaustive_lines = 8, std::size_t random_images = 8) {
  gpm::test::scratch_dirs d("crash-image");
  const gpm::pool_options o = options_for(d);
  pool_model m;
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = kPoolCrashPoints;
  co.exhaustive_lines = exhaustive_lines;
  co.random_images = random_images;
  co.seed = seed;
  co.disabled_site = disabled_site;
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_image(image, o, m); }, co);
  {
    gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
    run_workload(p, m, seed, ops);
  }
  return {checker.failure(), checker.stats()};
}

TEST(PoolCrashImage, EveryImageOfTheAllocatorRecovers) {
  const int trials = gpm::test::crash_trials(2);
  const bool long_run = trials > 2;
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r =
        check_workload(seed, long_run ? 400 : 120, "", long_run ? 10 : 8, long_run ? 32 : 8);
    ASSERT_FALSE(r.failure) << "seed " << seed << ": " << r.failure->describe();
    EXPECT_GT(r.stats.explorations, 100u) << "seed " << seed;
    EXPECT_GT(r.stats.images, r.stats.explorations) << "seed " << seed;
    std::printf("seed %llu: %llu crash points explored, %llu images, at most %zu dirty lines\n",
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(r.stats.explorations),
                static_cast<unsigned long long>(r.stats.images), r.stats.most_dirty_lines);
    for (const char* site : {"pool.create.header", "pool.root.write", "pool.allocate.zero",
                             "pool.allocate.entry", "pool.free.entry"}) {
      EXPECT_TRUE(r.stats.site_hits.contains(site)) << site << " was never reached";
    }
  }
}

// Deleting any one persist of the allocator's protocol must be caught.
class PoolPersistSite : public ::testing::TestWithParam<const char*> {};

TEST_P(PoolPersistSite, RemovalIsCaught) {
  const run_result r = check_workload(1, 120, GetParam());
  EXPECT_TRUE(r.stats.site_hits.contains(GetParam())) << "the workload never reached the site";
  ASSERT_TRUE(r.failure) << "no crash image failed without " << GetParam() << " (" << r.stats.images
                         << " images)";
  std::printf("without %s: %s\n", GetParam(), r.failure->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Allocator, PoolPersistSite,
                         ::testing::Values("pool.create.header", "pool.root.write",
                                           "pool.allocate.zero", "pool.allocate.entry",
                                           "pool.free.entry"),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

// ---- the persists of recovery and of a restore --------------------------------------------

// Allocates one object; the parent kills it at its crash point, with the entry half written.
GPM_CRASH_SCENARIO(allocate_one) {
  gpm::pool_options o = gpm::test::quiet_options(args.pm_dir, args.snapshot_dir);
  o.gpu = gpm::gpu_mapping::none;
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, o);
  p.allocate("torn", 4096);
  return 0;
}

// A pool whose directory operation a real crash interrupted (a torn entry): open() recovers it.
gpm::pool_options crash_mid_allocation(const gpm::test::scratch_dirs& d) {
  const gpm::pool_options o = options_for(d);
  gpm::pool::create(kPool, kPoolBytes, kLayout, o).close();
  const gpm::test::child_result child = gpm::test::run_child(
      "allocate_one", d.args(kPool, 1), gpm::test::kill_at("pool.allocate.entry_torn"));
  EXPECT_TRUE(child.killed) << child.describe();
  return o;
}

// A pool lost from tmpfs (a reboot) with a snapshot on disk: open() restores it.
gpm::pool_options lost_with_snapshot(const gpm::test::scratch_dirs& d) {
  gpm::pool_options o = options_for(d);
  gpm::pool::create(kPool, kPoolBytes, kLayout, o).snapshot();
  std::filesystem::remove(d.pool_path(kPool));
  o.restore_from_snapshot = true;
  return o;
}

// Prepares the pool with `prepare`, then opens it under a checker that adopts its mapping as
// open() makes it (so recovery's or the restore's persists are checked) and runs the workload.
run_result check_reopened(gpm::pool_options (*prepare)(const gpm::test::scratch_dirs&),
                          const std::string& disabled_site) {
  gpm::test::scratch_dirs d("crash-image-reopen");
  const gpm::pool_options open_options = prepare(d);
  const gpm::pool_options o = options_for(d);
  pool_model m;
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = kPoolCrashPoints;
  co.disabled_site = disabled_site;
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_image(image, o, m); }, co);
  {
    gpm::pool p = gpm::pool::open(kPool, kLayout, open_options);
    run_workload(p, m, 2, 20);
  }
  return {checker.failure(), checker.stats()};
}

struct reopen_case {
  const char* site;
  gpm::pool_options (*prepare)(const gpm::test::scratch_dirs&);
};

class PoolReopenPersistSite : public ::testing::TestWithParam<reopen_case> {};

TEST_P(PoolReopenPersistSite, IsEnoughAndItsRemovalIsCaught) {
  const char* site = GetParam().site;
  const run_result with = check_reopened(GetParam().prepare, "");
  ASSERT_FALSE(with.failure) << with.failure->describe();
  EXPECT_TRUE(with.stats.site_hits.contains(site)) << site << " was never reached";
  EXPECT_GT(with.stats.images, 0u);
  const run_result without = check_reopened(GetParam().prepare, site);
  ASSERT_TRUE(without.failure) << "no crash image failed without " << site;
  std::printf("without %s: %s\n", site, without.failure->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Pool, PoolReopenPersistSite,
                         ::testing::Values(reopen_case{"pool.recover.entry", crash_mid_allocation},
                                           reopen_case{"pool.restore.image", lost_with_snapshot}),
                         [](const auto& info) {
                           return gpm::test::site_test_name(info.param.site);
                         });

}  // namespace
