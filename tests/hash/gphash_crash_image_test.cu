// Crash-image tests of GPHash (gpm/platform/crash_image.hpp). Batches of insert / upsert / update
// / erase on a small table (so that it resizes) run under the checker on the host emulator. At the
// table's crash points (the protocol's steps inside kernels, resize, recovery) and between two
// batches, the checker writes each crash image (the persisted lines plus any subset of the
// unpersisted ones); the check opens it (pool::open, then gphash::open, which recovers the table)
// and compares it with what the workload knows: every acknowledged key there with its value, each
// key of the batch in flight in its state before or after the batch, no other key, no key twice,
// no torn value, no torn or INSERTING slot (gphash::check). With every persist site present no
// image fails; with any one of the table's persist sites disabled (a mutation: the persist
// deleted), some image must fail. src/hash/gphash.cu lists the sites; docs/crash-checking.md
// has the table of the tests that catch their removal.
//
// The check cannot run at a crash point inside a kernel: recovery launches kernels, which the
// emulator starts only after the kernel in flight. An image taken there is kept, with the model
// of that moment, and checked at the next crash point in host code (a batch's end at the latest).
// The emulator runs one block at a time (one worker, and a batch fits one block), so no other GPU
// thread stores or persists while the checker reads the table.
// Trials: GPMKIT_CRASH_TRIALS workloads of each key kind with different seeds (by default 2 of
// 8-byte keys and 1 of each other kind; crash-long runs 10 of each, longer and with more images).
#include <gpm/config.hpp>
#include <gpm/hash/gphash.cuh>
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>
#if GPM_BACKEND_HOST
#include <gpm/platform/emulator.hpp>
#endif

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "hash_test_util.hpp"
#include "kernel_image_checks.hpp"

namespace {

using gpm::hash_status;
using namespace gpm::test::hash;

constexpr char kLayout[] = "gphash-image";
constexpr char kPool[] = "kv.pool";
constexpr char kTable[] = "kv";
constexpr std::uint64_t kPoolBytes = 256 << 10;
constexpr std::uint64_t kKeys = 96;        // the key space; the table starts with 24 slots
constexpr std::uint32_t kValueBytes = 16;  // key index and version (hash_test_util's values)
constexpr std::size_t kBatch = 8;          // keys per batch at most: one block of the kernels

// The tables explored: one that resizes (24 slots, whose 3 buckets every key reaches), and one
// whose items move (96 slots: a key reaches 4 of 12 buckets, so that when its own are full an
// item of them can move). The first `fill_batches` batches insert 8 fresh keys each. The second
// table neither resizes nor displaces by itself: inserts that find no room report `full`, and
// the workload then does what a user of the device view does, make_room() for those keys, then
// (after updating every key, so that the moved items change) inserts them again. Between the
// moves and the retry no insert takes a slot they freed, so each clear has to be durable by
// itself (in bulk inserts the retry at once usually overwrites the freed slot).
struct geometry {
  gpm::gphash_config config;
  int fill_batches;
  bool moves;
};
constexpr geometry kResizing{{.value_bytes = kValueBytes, .top_level = 1}, 4, false};
constexpr geometry kDisplacing{{.value_bytes = kValueBytes, .top_level = 3}, 12, true};

gpm::gphash_options table_options(const geometry& g = kResizing) {
  gpm::gphash_options o;
  o.cg_size = 4;
  o.block_threads = 32;  // 8 tiles: a batch of kBatch keys is one block
  o.displace = o.auto_resize = !g.moves;
  return o;
}

gpm::pool_options options_for(const gpm::test::scratch_dirs& d) {
  return gpm::test::image_options(d, 16);
}

// The crash points explored: the host steps of resize and recovery and a crash between two
// batches, and (where a test asks for them) the protocol's steps inside kernels.
const std::vector<std::string> kHostCrashPoints = {
    "gphash.resize.begin",         "gphash.resize.allocated", "gphash.resize.started",
    "gphash.resize.rehashed",      "gphash.resize.committed", "gphash.recover.cleared",
    "gphash.recover.deduplicated", "workload.between_ops",
};
const std::vector<std::string> kKernelCrashPoints = {
    "gphash.insert.claimed", "gphash.insert.published", "gphash.update.prepared",
    "gphash.rehash.copied",  "gphash.move.copied",
};

// The persist sites the batches reach (gphash.recover.dedupe needs a table with duplicates;
// the displacement's only the displacing table).
const std::vector<const char*> kWorkloadSites = {
    "gphash.create.record",  "gphash.state.write", "gphash.value.write", "gphash.insert.claim",
    "gphash.insert.publish", "gphash.update.swap", "gphash.erase.clear",
};
const std::vector<const char*> kDisplacementSites = {
    "gphash.move.claim",
    "gphash.move.publish",
    "gphash.move.clear",
};

std::string describe(const std::optional<std::uint64_t>& state) {
  return state ? "version " + std::to_string(*state) : "absent";
}

// What the workload knows about the table: the acknowledged state of every key, and the batch in
// flight, whose keys may each show their state before or after it, never anything else.
struct table_model {
  model acked;
  std::map<std::uint64_t, std::optional<std::uint64_t>> pending;  // key -> state after the batch
  std::string doing;                                              // the batch, for messages
  std::uint64_t step = 0;  // changes with the model: an image and a step name one check
};

// Recovers the image (pool::open, gphash::open) and checks it against `m`.
template <class Key>
std::string check_table(const std::string& image, const gpm::pool_options& o,
                        const table_model& m) {
  gpm::pool p = gpm::pool::open(image, kLayout, o);
  auto t = gpm::gphash<Key>::open(p, kTable, table_options());
  driver<Key> d(t);
  std::vector<std::uint64_t> all(kKeys);
  std::iota(all.begin(), all.end(), 0);
  const auto f = d.find(all);
  std::uint64_t present = 0;
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    std::optional<std::uint64_t> got;
    if (f.status[k] == hash_status::found) {
      const std::uint64_t* v = &f.values[k * d.words()];
      if (!value_is(v, d.words(), k, v[1])) return "key " + std::to_string(k) + " has a torn value";
      got = v[1];
      ++present;
    } else if (f.status[k] != hash_status::not_found) {
      return "find of key " + std::to_string(k) + " says " + gpm::to_string(f.status[k]);
    }
    const std::optional<std::uint64_t> before = m.acked.get(k);
    const auto in_flight = m.pending.find(k);
    const std::optional<std::uint64_t> after =
        in_flight == m.pending.end() ? before : in_flight->second;
    if (got != before && got != after) {
      return "key " + std::to_string(k) + " is " + describe(got) + ", acknowledged " +
             describe(before) +
             (in_flight == m.pending.end() ? "" : ", " + describe(after) + " after " + m.doing);
    }
  }
  const gpm::gphash_check c = t.check();
  if (!c.ok) return c.problems.empty() ? "INSERTING slots after recovery" : c.problems.front();
  if (c.items != present) {
    return "the table holds " + std::to_string(c.items) + " items but " + std::to_string(present) +
           " keys are found";
  }
  return "";
}

// The check handed to the checker (tests/support/kernel_image_checks.hpp): images taken inside
// kernels are checked at the next crash point in host code, against the model of their moment.
template <class Key>
gpm::test::kernel_image_checks<table_model> image_checks(const table_model& m,
                                                         const gpm::pool_options& o,
                                                         const std::string& kept_path) {
  return {[&m] { return m; },
          [](const table_model& t) { return t.doing + ", step " + std::to_string(t.step); },
          [o](const std::string& path, const table_model& kept, const table_model&) {
            return check_table<Key>(path, o, kept);
          },
          kept_path};
}

// One batch: `o` on `keys` with version `version`, keeping `m` up to date. A crash point first:
// what the last batch (or recovery, or create) left must be durable.
// With `full_allowed`, an insert may find no room (the key stays absent).
template <class Key>
void run_batch(driver<Key>& d, table_model& m, op o, const std::vector<std::uint64_t>& keys,
               std::uint64_t version, bool full_allowed = false) {
  gpm::crash_point("workload.between_ops");
  ++m.step;
  model after = m.acked;
  std::vector<hash_status> want;
  for (std::uint64_t k : keys) {
    want.push_back(after.apply(o, k, version));
    m.pending[k] = after.get(k);
  }
  static const char* const kOps[] = {"insert", "upsert", "update", "erase"};
  m.doing = std::string(kOps[static_cast<int>(o)]) + " batch " + std::to_string(version);
  const std::vector<hash_status> got =
      d.run(o, keys, std::vector<std::uint64_t>(keys.size(), version));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (full_allowed && got[i] == hash_status::full && want[i] == hash_status::inserted) {
      after.items.erase(keys[i]);
      want[i] = got[i];
    }
  }
  m.acked = std::move(after);
  m.pending.clear();
  ++m.step;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << m.doing << ", key " << keys[i] << ": " << gpm::to_string(got[i])
                               << ", not " << gpm::to_string(want[i]);
  }
}

// `batches` batches of up to kBatch distinct keys, versions from `first_version` on. The first
// `fill` insert fresh keys, 8 each: with the resizing table keys 0 to 31, more than its 24 slots,
// so that even a short run resizes it; with the displacing table 88 keys, past the 0.9 where
// inserts start to need moves. The next four update, erase, upsert and insert, so that it runs
// every operation; then random batches, mostly inserts. Updates and erases take keys that are
// present first.
template <class Key>
void run_batches(gpm::gphash<Key>& t, table_model& m, std::uint64_t seed, int batches,
                 std::uint64_t first_version = 1, const geometry& g = kResizing) {
  const int fill = g.fill_batches;
  driver<Key> d(t);
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> space(kKeys);
  std::iota(space.begin(), space.end(), 0);
  constexpr op kEach[] = {op::update, op::erase, op::upsert, op::insert};
  for (int b = 0; b < batches; ++b) {
    const std::uint64_t r = rng() % 10;
    const op o = b < fill       ? op::insert
                 : b < fill + 4 ? kEach[b - fill]
                 : r < 4        ? op::insert
                 : r < 6        ? op::upsert
                 : r < 8        ? op::update
                                : op::erase;
    std::shuffle(space.begin(), space.end(), rng);
    if (o == op::update || o == op::erase) {
      std::stable_partition(space.begin(), space.end(),
                            [&](std::uint64_t k) { return m.acked.get(k).has_value(); });
    }
    std::vector<std::uint64_t> keys(space.begin(), space.begin() + 1 + rng() % kBatch);
    if (b < fill) {
      keys.resize(kBatch);
      std::iota(keys.begin(), keys.end(), b * kBatch);
    }
    if (b == fill && g.moves) {
      std::vector<std::uint64_t> full;
      for (std::uint64_t k = 0; k < fill * kBatch; ++k) {
        if (!m.acked.get(k)) full.push_back(k);
      }
      ASSERT_FALSE(full.empty()) << "the inserts of the first batches all found room";
      gpm::crash_point("workload.between_ops");
      const key_upload<Key> up = upload_keys<Key>(full);
      ASSERT_GT(t.make_room(up.keys.data(), full.size()), 0u);
      for (std::uint64_t k = 0; k < fill * kBatch; k += kBatch) {
        std::vector<std::uint64_t> present;
        for (std::uint64_t j = k; j < k + kBatch; ++j) {
          if (m.acked.get(j)) present.push_back(j);
        }
        run_batch(d, m, op::update, present, first_version + b);
        if (::testing::Test::HasFatalFailure()) return;
      }
      for (std::size_t k = 0; k < full.size(); k += kBatch) {
        const std::vector<std::uint64_t> again(full.begin() + k,
                                               full.begin() + std::min(k + kBatch, full.size()));
        run_batch(d, m, op::insert, again, first_version + b, true);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    run_batch(d, m, o, keys, first_version + b, g.moves);
    if (::testing::Test::HasFatalFailure()) return;
  }
  gpm::crash_point("workload.between_ops");
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
  std::uint64_t kernel_images = 0;  // of stats.images, those taken inside kernels
  std::uint64_t checked = 0;        // distinct images (for their model) recovered and checked
};

// How a run explores: which persist site it disables (none: ""), whether it explores the crash
// points inside kernels too, and how many images per crash point.
struct exploration {
  const geometry* table = &kResizing;
  std::string disabled_site;
  bool in_kernels = true;
  std::size_t exhaustive_lines = 6;
  std::size_t random_images = 6;
};

gpm::crash_image_options checker_options(const gpm::test::scratch_dirs& d, std::uint64_t seed,
                                         const exploration& e) {
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = kHostCrashPoints;
  if (e.in_kernels) {
    co.crash_points.insert(co.crash_points.end(), kKernelCrashPoints.begin(),
                           kKernelCrashPoints.end());
  }
  co.exhaustive_lines = e.exhaustive_lines;
  co.random_images = e.random_images;
  co.seed = seed;
  co.disabled_site = e.disabled_site;
  return co;
}

// Arms a checker that adopts the pool's mapping from its creation, creates the table and runs
// the batches.
template <class Key>
run_result check_workload(std::uint64_t seed, int batches, const exploration& e) {
  gpm::test::scratch_dirs d("gphash-image");
  const gpm::pool_options o = options_for(d);
  table_model m;
  auto checks = image_checks<Key>(m, o, d.pool_path("kept.pool"));
  gpm::crash_image_checker checker([&](const std::string& image) { return checks(image); },
                                   checker_options(d, seed, e));
  {
    gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
    auto t = gpm::gphash<Key>::create(p, kTable, e.table->config, table_options(*e.table));
    run_batches(t, m, seed, batches, 1, *e.table);
  }
  return {checker.failure(), checker.stats(), checks.kernel_images(), checks.checked()};
}

// Every test here runs on the host emulator with one worker (see the top of the file).
class GphashCrashImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if GPM_BACKEND_HOST
    saved_ = gpm::emu::current_options();
    gpm::emu::options one = saved_;
    one.workers = 1;
    gpm::emu::set_options(one);
#else
    GTEST_SKIP() << "kernels on a GPU do not feed the crash-image checker's model";
#endif
  }
#if GPM_BACKEND_HOST
  void TearDown() override { gpm::emu::set_options(saved_); }

 private:
  gpm::emu::options saved_;
#endif
};

void print_stats(const char* what, std::uint64_t seed, const run_result& r) {
  std::printf(
      "%s, seed %llu: %llu crash points explored, %llu images (%llu inside kernels, "
      "%llu distinct ones checked), at most %zu dirty lines\n",
      what, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(r.stats.explorations),
      static_cast<unsigned long long>(r.stats.images),
      static_cast<unsigned long long>(r.kernel_images), static_cast<unsigned long long>(r.checked),
      r.stats.most_dirty_lines);
}

// `ci_trials` seeds in CI (GPMKIT_CRASH_TRIALS more, with longer runs and more images).
template <class Key>
void every_image_recovers(const char* what, int ci_trials, const geometry& table = kResizing) {
  const int trials = gpm::test::crash_trials(ci_trials);
  const bool long_run = trials > 2;
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    exploration e;
    e.table = &table;
    if (long_run) {
      e.exhaustive_lines = 8;
      e.random_images = 16;
    }
    const run_result r = check_workload<Key>(seed, table.fill_batches + (long_run ? 44 : 8), e);
    ASSERT_FALSE(r.failure) << what << ", seed " << seed << ": " << r.failure->describe();
    EXPECT_GT(r.kernel_images, 0u) << what << ", seed " << seed;
    for (const char* site : &table == &kDisplacing ? kDisplacementSites : kWorkloadSites) {
      EXPECT_TRUE(r.stats.site_hits.contains(site)) << site << " was never reached";
    }
    print_stats(what, seed, r);
  }
}

TEST_F(GphashCrashImageTest, EveryImageOfTheTableRecovers) {
  every_image_recovers<std::uint64_t>("8-byte keys", 2);
}

TEST_F(GphashCrashImageTest, EveryImageOfATableOf32ByteKeysRecovers) {
  every_image_recovers<gpm::key32>("32-byte keys", 1);
}

TEST_F(GphashCrashImageTest, EveryImageOfATableOfVariableLengthKeysRecovers) {
  every_image_recovers<gpm::varkey>("variable-length keys", 1);
}

TEST_F(GphashCrashImageTest, EveryImageOfATableThatDisplacesRecovers) {
  every_image_recovers<std::uint64_t>("8-byte keys, displacing", 1, kDisplacing);
}

// Deleting any one persist of the table's protocol must be caught. The host crash points
// suffice to catch each (and cost a tenth of the images).
class GphashPersistSite : public GphashCrashImageTest,
                          public ::testing::WithParamInterface<const char*> {};

TEST_P(GphashPersistSite, RemovalIsCaught) {
  // The parameter is one of the lists' own pointers.
  const bool moves = std::find(kDisplacementSites.begin(), kDisplacementSites.end(), GetParam()) !=
                     kDisplacementSites.end();
  const geometry& table = moves ? kDisplacing : kResizing;
  const run_result r = check_workload<std::uint64_t>(
      1, table.fill_batches + 60,
      {.table = &table, .disabled_site = GetParam(), .in_kernels = false});
  EXPECT_TRUE(r.stats.site_hits.contains(GetParam())) << "the workload never reached the site";
  ASSERT_TRUE(r.failure) << "no crash image failed without " << GetParam() << " (" << r.stats.images
                         << " images)";
  std::printf("without %s: %s\n", GetParam(), r.failure->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Gphash, GphashPersistSite, ::testing::ValuesIn(kWorkloadSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(GphashDisplacement, GphashPersistSite,
                         ::testing::ValuesIn(kDisplacementSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

// ---- recovery's persists ----------------------------------------------------------------------

// The keys of the table with duplicates: few enough to leave free slots next to them.
std::vector<std::uint64_t> duplicated_keys() {
  std::vector<std::uint64_t> keys(kBatch);
  std::iota(keys.begin(), keys.end(), 0);
  return keys;
}

// A table for recovery to repair. It holds duplicate copies of its keys, as one written before
// concurrent inserts of a key were kept apart could (or a crash inside a move): each item of the
// top level (1) copied into a free slot of level 0. That level's one bucket is a candidate of every
// key, and a copy below the top ranks below the original, which stays the valid copy; the copy also
// lies on another cache line, so that only recovery's own persist makes its clearing durable. It
// also holds a slot left INSERTING (with a value offset that is no cell), which recovery clears
// without persisting: the images after it show that this is enough. Returns the copies made.
std::uint64_t table_to_repair(const gpm::test::scratch_dirs& d, table_model& m) {
  gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, options_for(d));
  {
    auto t = gpm::gphash<std::uint64_t>::create(p, kTable, kResizing.config, table_options());
    driver<std::uint64_t> drv(t);
    run_batch(drv, m, op::insert, duplicated_keys(), 1);
  }
  // A bucket of 8 slots of 8-byte keys: their 8 fingerprint words, then their 8 value offsets.
  constexpr int kSlots = 8;
  auto* top = p.host_ptr<std::uint64_t>(p.find(std::string(kTable) + ".L1")->offset);
  auto* below = p.host_ptr<std::uint64_t>(p.find(std::string(kTable) + ".L0")->offset);
  std::uint64_t copies = 0;
  int free_slot = 0;
  bool claimed = false;
  for (int b = 0; b < 2; ++b) {
    std::uint64_t* bucket = top + 2 * kSlots * b;
    for (int s = 0; s < kSlots; ++s) {
      if (bucket[s] == 0 && !claimed) {
        bucket[s] = ~0ull;
        bucket[kSlots + s] = 1;
        claimed = true;
      }
      if (bucket[s] == 0 || bucket[s] == ~0ull) continue;
      while (free_slot < kSlots && below[free_slot] != 0) ++free_slot;
      if (free_slot == kSlots) break;
      below[free_slot] = bucket[s];
      below[kSlots + free_slot] = bucket[kSlots + s];
      ++copies;
    }
  }
  EXPECT_TRUE(claimed);
  return copies;
}

// Opens the table to repair under a checker that adopts the pool's mapping as open() makes
// it, so recovery's persists are checked; then erases every key (a duplicate that survived would
// bring its key back) and runs random batches. Host crash points only: recovery's are host code.
run_result check_recovered_duplicates(const std::string& disabled_site) {
  gpm::test::scratch_dirs d("gphash-image-dup");
  table_model m;
  const std::uint64_t copies = table_to_repair(d, m);
  EXPECT_GT(copies, 0u);
  const gpm::pool_options o = options_for(d);
  auto checks = image_checks<std::uint64_t>(m, o, d.pool_path("kept.pool"));
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return checks(image); },
      checker_options(d, 2, {.disabled_site = disabled_site, .in_kernels = false}));
  {
    gpm::pool p = gpm::pool::open(kPool, kLayout, o);
    auto t = gpm::gphash<std::uint64_t>::open(p, kTable, table_options());
    EXPECT_EQ(t.last_recovery().duplicates_removed, copies);
    EXPECT_EQ(t.last_recovery().inserting_cleared, 1u);
    driver<std::uint64_t> drv(t);
    run_batch(drv, m, op::erase, duplicated_keys(), 2);
    run_batches(t, m, 2, 8, 3);
  }
  return {checker.failure(), checker.stats(), checks.kernel_images(), checks.checked()};
}

class GphashRecoveryPersistSite : public GphashCrashImageTest,
                                  public ::testing::WithParamInterface<const char*> {};

TEST_P(GphashRecoveryPersistSite, IsEnoughAndItsRemovalIsCaught) {
  const char* site = GetParam();
  const run_result with = check_recovered_duplicates("");
  ASSERT_FALSE(with.failure) << with.failure->describe();
  EXPECT_TRUE(with.stats.site_hits.contains(site)) << site << " was never reached";
  const run_result without = check_recovered_duplicates(site);
  ASSERT_TRUE(without.failure) << "no crash image failed without " << site;
  std::printf("without %s: %s\n", site, without.failure->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Gphash, GphashRecoveryPersistSite,
                         ::testing::Values("gphash.recover.dedupe"),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

}  // namespace
