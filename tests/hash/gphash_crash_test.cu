// Crash tests of GPHash with real process crashes: a child runs batches of insert / upsert /
// update / erase (with resizes, since the table starts small) and is killed with SIGKILL at a
// random moment or at a crash point of the protocol, resize or recovery (kernels' crash points
// act on a GPU too: see gpm/platform/crash_point.hpp). The parent reopens the pool, recovers the
// table and checks:
//  - every acknowledged batch (reported after the host API returned) is durable,
//  - each key of the batch in flight is in its state before or after its operation,
//  - no torn key or value (values identify their key and version), no visible duplicate,
//    no INSERTING slot, the index consistent (gphash::check),
//  - recovery is idempotent: recovering again changes nothing, and a recovery killed midway
//    followed by another gives the same table as one straight recovery;
//  - every repair step of recovery gets work: crashes at the points that leave an INSERTING slot
//    (without the mirror: with it a claim leaves the pool's slot EMPTY, and recovery must find
//    no INSERTING slot) or a duplicate make recovery report clearing them.
// Every test runs half of its trials with the fingerprint mirror on, in the child and the parent
// (gphash::check then also compares the rebuilt mirror with the pool).
// Trials: GPMKIT_CRASH_TRIALS (tens in CI, 1000 in the crash-long label).
#include <gpm/hash/gphash.cuh>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "hash_test_util.hpp"

namespace {

using gpm::hash_status;
using namespace gpm::test::hash;

constexpr char kLayout[] = "gphash-crash";
constexpr std::uint64_t kSpace = 1024;
constexpr int kBatches = 300;
constexpr std::uint32_t kValueBytes = 48;

gpm::pool_options options_for(const gpm::test::scenario_args& a) {
  return quiet_options(a.pm_dir, a.snapshot_dir);
}

// Batch b of a run: distinct keys, each with one operation; version b + 1.
struct batch {
  std::vector<std::uint64_t> keys[4];  // by op
};
batch make_batch(std::uint64_t seed, int b) {
  std::mt19937_64 rng(gpm::mix64(seed ^ (0x1000u + b)));
  std::vector<std::uint64_t> space(kSpace);
  std::iota(space.begin(), space.end(), 0);
  std::shuffle(space.begin(), space.end(), rng);
  batch out;
  const std::size_t n = 16 + rng() % 48;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = rng() % 10;
    out.keys[r < 5 ? 0 : r < 7 ? 1 : r < 9 ? 2 : 3].push_back(space[i]);
  }
  return out;
}

template <class Key, bool Mirror>
int run_batches(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  auto t = gpm::gphash<Key>::open(p, "kv", mirrored(Mirror));
  driver<Key> d(t);
  gpm::test::report_progress(args, "ready");
  for (int b = 0; b < kBatches; ++b) {
    const batch x = make_batch(args.seed, b);
    for (int o = 0; o < 4; ++o) {
      d.run(static_cast<op>(o), x.keys[o], std::vector<std::uint64_t>(x.keys[o].size(), b + 1));
    }
    gpm::test::report_progress(args, "done " + std::to_string(b));
  }
  return 0;
}
GPM_CRASH_SCENARIO(gphash_batches_8) { return run_batches<std::uint64_t, false>(args); }
GPM_CRASH_SCENARIO(gphash_batches_32) { return run_batches<gpm::key32, false>(args); }
GPM_CRASH_SCENARIO(gphash_batches_var) { return run_batches<gpm::varkey, false>(args); }
GPM_CRASH_SCENARIO(gphash_batches_8_mirror) { return run_batches<std::uint64_t, true>(args); }
GPM_CRASH_SCENARIO(gphash_batches_32_mirror) { return run_batches<gpm::key32, true>(args); }
GPM_CRASH_SCENARIO(gphash_batches_var_mirror) { return run_batches<gpm::varkey, true>(args); }

template <class Key, bool Mirror>
int recover_only(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  gpm::gphash<Key>::open(p, "kv", mirrored(Mirror));
  return 0;
}
GPM_CRASH_SCENARIO(gphash_recover_8) { return recover_only<std::uint64_t, false>(args); }
GPM_CRASH_SCENARIO(gphash_recover_32) { return recover_only<gpm::key32, false>(args); }
GPM_CRASH_SCENARIO(gphash_recover_var) { return recover_only<gpm::varkey, false>(args); }
GPM_CRASH_SCENARIO(gphash_recover_8_mirror) { return recover_only<std::uint64_t, true>(args); }
GPM_CRASH_SCENARIO(gphash_recover_32_mirror) { return recover_only<gpm::key32, true>(args); }
GPM_CRASH_SCENARIO(gphash_recover_var_mirror) { return recover_only<gpm::varkey, true>(args); }

// The scenario-name suffix of a key type.
template <class Key>
std::string key_name() {
  if constexpr (std::is_same_v<Key, std::uint64_t>) return "8";
  if constexpr (std::is_same_v<Key, gpm::key32>) return "32";
  return "var";
}

// The scenario `kind` ("batches", "recover") for a key type, with or without the mirror.
template <class Key>
std::string scenario(const char* kind, bool mirror) {
  return std::string("gphash_") + kind + "_" + key_name<Key>() + (mirror ? "_mirror" : "");
}

// Runs trial t with 8-byte, 32-byte or variable-length keys in turn.
template <class Fn>
void for_key_of_trial(int t, Fn&& fn) {
  switch (t % 3) {
    case 0: fn(std::uint64_t{}); break;
    case 1: fn(gpm::key32{}); break;
    default: fn(gpm::varkey{}); break;
  }
}

// Host-side steps of a resize, and protocol steps inside kernels (the latter hit many times per
// batch, so the trial picks a later hit).
const char* const kResizePoints[] = {"gphash.resize.begin", "gphash.resize.allocated",
                                     "gphash.resize.started", "gphash.resize.rehashed",
                                     "gphash.resize.committed"};
const char* const kProtocolPoints[] = {"gphash.insert.claimed", "gphash.insert.published",
                                       "gphash.update.prepared", "gphash.rehash.copied",
                                       "gphash.move.copied"};

// Every key's state: present with a version, or absent.
template <class Key>
std::vector<std::optional<std::uint64_t>> read_all(gpm::gphash<Key>& t, const std::string& what) {
  driver<Key> d(t);
  std::vector<std::uint64_t> space(kSpace);
  std::iota(space.begin(), space.end(), 0);
  const auto f = d.find(space);
  std::vector<std::optional<std::uint64_t>> out(kSpace);
  for (std::uint64_t k = 0; k < kSpace; ++k) {
    if (f.status[k] == hash_status::not_found) continue;
    EXPECT_EQ(f.status[k], hash_status::found) << what << " key " << k;
    const std::uint64_t* v = &f.values[k * d.words()];
    const std::uint64_t version = v[1];
    EXPECT_TRUE(value_is(v, d.words(), k, version)) << what << ": torn value for key " << k;
    out[k] = version;
  }
  return out;
}

// What the trials of one test hit, printed at its end: evidence that crashes landed mid-batch,
// mid-resize and left work for recovery.
struct tally {
  int trials = 0, killed = 0, in_flight = 0, resumed = 0;
  std::uint64_t acked = 0, inserting = 0, duplicates = 0, resumed_duplicates = 0;
  void print(const char* test) const {
    std::printf(
        "[ tally    ] %s: %d trials, %d killed (%d mid-batch), %llu batches acknowledged, "
        "%d resizes resumed, %llu INSERTING slots cleared, %llu duplicates removed (%llu by a "
        "resumed rehash)\n",
        test, trials, killed, in_flight, static_cast<unsigned long long>(acked), resumed,
        static_cast<unsigned long long>(inserting), static_cast<unsigned long long>(duplicates),
        static_cast<unsigned long long>(resumed_duplicates));
  }
};
tally g_tally;

// Checks the recovered table of a trial; `report` receives what recovery repaired.
template <class Key>
void check_trial(const gpm::test::scratch_dirs& dirs, const std::string& pool_name,
                 std::uint64_t seed, bool mirror, const gpm::test::child_result& r,
                 const std::string& what, gpm::gphash_recovery* report = nullptr) {
  int acked = 0;
  for (const std::string& line : r.progress) acked += line.rfind("done ", 0) == 0;
  model before;  // after the acknowledged batches
  for (int b = 0; b < acked; ++b) {
    const batch x = make_batch(seed, b);
    for (int o = 0; o < 4; ++o) {
      for (std::uint64_t k : x.keys[o]) before.apply(static_cast<op>(o), k, b + 1);
    }
  }
  model after = before;  // if the batch in flight had finished
  if (acked < kBatches) {
    const batch x = make_batch(seed, acked);
    for (int o = 0; o < 4; ++o) {
      for (std::uint64_t k : x.keys[o]) after.apply(static_cast<op>(o), k, acked + 1);
    }
  }
  gpm::pool p =
      gpm::pool::open(pool_name, kLayout, quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
  auto t = gpm::gphash<Key>::open(p, "kv", mirrored(mirror));
  const gpm::gphash_recovery& rec = t.last_recovery();
  ++g_tally.trials;
  g_tally.killed += r.killed;
  g_tally.in_flight += r.killed && acked < kBatches;
  g_tally.acked += acked;
  g_tally.resumed += rec.resize_resumed;
  g_tally.inserting += rec.inserting_cleared;
  g_tally.duplicates += rec.duplicates_removed;
  g_tally.resumed_duplicates += rec.resumed_duplicates;
  if (report != nullptr) *report = rec;
  const auto state = read_all(t, what);
  for (std::uint64_t k = 0; k < kSpace; ++k) {
    const bool ok = state[k] == before.get(k) || state[k] == after.get(k);
    ASSERT_TRUE(ok) << what << ": key " << k << " has "
                    << (state[k] ? "version " + std::to_string(*state[k]) : "no value") << " after "
                    << acked << " acknowledged batches";
  }
  const gpm::gphash_check c = t.check();
  ASSERT_TRUE(c.ok) << what << ": "
                    << (c.problems.empty() ? "INSERTING slots" : c.problems.front());
  // Recovering again finds nothing to do.
  const gpm::gphash_recovery again = t.recover();
  EXPECT_EQ(again.inserting_cleared, 0u) << what;
  EXPECT_EQ(again.duplicates_removed, 0u) << what;
  EXPECT_FALSE(again.resize_resumed) << what;
  EXPECT_EQ(again.items, t.last_recovery().items) << what;
}

template <class Key>
void create_table(const gpm::test::scratch_dirs& dirs) {
  gpm::pool p = gpm::pool::create("kv.pool", 32 << 20, kLayout,
                                  quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
  gpm::gphash<Key>::create(p, "kv", {.value_bytes = kValueBytes, .top_level = 3});
}

template <class Key>
void batches_trial(int t, bool at_points) {
  gpm::test::scratch_dirs dirs("gphash-crash");
  create_table<Key>(dirs);
  const std::uint64_t seed = gpm::test::trial_seed(t);
  std::mt19937_64 rng(seed);
  gpm::test::kill_policy policy;
  const bool mirror = t / 3 % 2 == 1;  // each key kind in turn, then again with the mirror
  std::string what = "keys " + key_name<Key>() + (mirror ? " (mirror)" : "") + ", trial " +
                     std::to_string(t) + " (seed " + std::to_string(seed) + ")";
  if (!at_points) {
    policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 120), "ready");
    what += ", killed at a random time";
  } else if (t % 4 < 2) {
    const char* point = kResizePoints[rng() % std::size(kResizePoints)];
    policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(1 + rng() % 3));
    what += std::string(", crash point ") + point;
  } else {
    const char* point = kProtocolPoints[rng() % std::size(kProtocolPoints)];
    policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(1 + rng() % 400));
    what += std::string(", crash point ") + point;
  }
  const auto r =
      gpm::test::run_child(scenario<Key>("batches", mirror), dirs.args("kv.pool", seed), policy);
  ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
  check_trial<Key>(dirs, "kv.pool", seed, mirror, r, what);
}

TEST(GphashCrash, AcknowledgedBatchesSurviveRandomKills) {
  g_tally = {};
  const int trials = gpm::test::crash_trials(16);
  for (int t = 0; t < trials; ++t) {
    for_key_of_trial(t, [&](auto key) { batches_trial<decltype(key)>(t, false); });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(GphashCrash, CrashesAtEveryStepOfTheProtocolAndOfResize) {
  g_tally.print("random kills");
  g_tally = {};
  const int trials = gpm::test::crash_trials(16);
  for (int t = 0; t < trials; ++t) {
    for_key_of_trial(t, [&](auto key) { batches_trial<decltype(key)>(t, true); });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Crash points that leave recovery a repair to make, and what recovery must report: a slot
// claimed (INSERTING) whose insert never completes, cleared (with the fingerprint mirror a claim
// never reaches the pool, so recovery must find no INSERTING slot); an item that a rehash copied up
// but had not yet cleared below, a duplicate, cleared when the resize resumes; an item that
// displacement copied but had not yet cleared at its source, a duplicate in the live levels,
// cleared by the dedupe pass. The trial crashes at one of the first `hits` hits, which every run
// reaches: claims come with the first batch, and a run's resizes rehash, and its displacements
// move, many more items than that.
struct repair_point {
  const char* point;
  int hits;
  bool (*repaired)(const gpm::gphash_recovery&, bool mirror);
  const char* repair;
};
const repair_point kRepairPoints[] = {
    {"gphash.insert.claimed", 40,
     [](const gpm::gphash_recovery& r, bool mirror) {
       return mirror ? r.inserting_cleared == 0 : r.inserting_cleared > 0;
     },
     "no INSERTING slot cleared (none, with the mirror)"},
    {"gphash.rehash.copied", 8,
     [](const gpm::gphash_recovery& r, bool) {
       return r.resize_resumed && r.resumed_duplicates > 0;
     },
     "no resumed resize that cleared a duplicate"},
    {"gphash.move.copied", 8,
     [](const gpm::gphash_recovery& r, bool) {
       return r.duplicates_removed > r.resumed_duplicates;
     },
     "no duplicate of a moved item cleared"},
};

template <class Key>
void repair_trial(int t, const repair_point& at) {
  gpm::test::scratch_dirs dirs("gphash-repair");
  create_table<Key>(dirs);
  const std::uint64_t seed = gpm::test::trial_seed(2000 + t);
  std::mt19937_64 rng(seed);
  const std::string point = std::string(at.point) + ":" + std::to_string(1 + rng() % at.hits);
  const bool mirror = t % 2 == 1;  // every point gets both within two rounds
  const std::string what = "keys " + key_name<Key>() + (mirror ? " (mirror)" : "") + ", trial " +
                           std::to_string(t) + " (seed " + std::to_string(seed) +
                           "), crash point " + point;
  const auto r = gpm::test::run_child(scenario<Key>("batches", mirror), dirs.args("kv.pool", seed),
                                      gpm::test::kill_at(point));
  ASSERT_TRUE(r.killed) << what << ": the run did not reach the crash point: " << r.describe();
  gpm::gphash_recovery rec;
  check_trial<Key>(dirs, "kv.pool", seed, mirror, r, what, &rec);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(at.repaired(rec, mirror))
      << what << ": recovery reported " << at.repair << " (cleared " << rec.inserting_cleared
      << " INSERTING slots, removed " << rec.duplicates_removed << " duplicates)";
}

// Each trial aims at one repair point in turn (every point at least once, whatever the budget)
// and must find recovery repairing what the crash left there, so the test fails if a change of
// the protocol stops a crash from reaching a repair step of recovery.
TEST(GphashCrash, EveryRepairStepOfRecoveryGetsWork) {
  g_tally.print("crash points");
  g_tally = {};
  const int trials =
      std::max(static_cast<int>(std::size(kRepairPoints)), gpm::test::crash_trials(6));
  for (int t = 0; t < trials; ++t) {
    const repair_point& at = kRepairPoints[t % std::size(kRepairPoints)];
    const int round = t / static_cast<int>(std::size(kRepairPoints));
    for_key_of_trial(round, [&](auto key) { repair_trial<decltype(key)>(t, at); });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Where recovery itself is killed: its host steps, and the kernels' points that a resumed rehash
// reaches.
const char* const kRecoveryPoints[] = {"gphash.recover.cleared", "gphash.recover.deduplicated",
                                       "gphash.resize.rehashed", "gphash.resize.committed",
                                       "gphash.rehash.copied",   "gphash.insert.claimed"};

template <class Key>
void recovery_trial(int t) {
  gpm::test::scratch_dirs dirs("gphash-idem");
  create_table<Key>(dirs);
  const std::uint64_t seed = gpm::test::trial_seed(1000 + t);
  std::mt19937_64 rng(seed);
  const bool mirror = t / 3 % 2 == 1;
  const std::string what = "trial " + std::to_string(t) + (mirror ? " (mirror)" : "") + " (seed " +
                           std::to_string(seed) + ")";
  // A crash that may leave a resize half done (a random kill or one inside a resize), an
  // INSERTING slot, or a duplicate of a rehashed item.
  gpm::test::kill_policy policy;
  switch (t % 4) {
    case 0: policy = gpm::test::kill_after_ms(1 + static_cast<double>(rng() % 120), "ready"); break;
    case 1:
      policy = gpm::test::kill_at("gphash.resize.started:" + std::to_string(1 + rng() % 3));
      break;
    default: {
      const repair_point& at = kRepairPoints[t % 4 - 2];
      policy =
          gpm::test::kill_at(std::string(at.point) + ":" + std::to_string(1 + rng() % at.hits));
      break;
    }
  }
  auto r =
      gpm::test::run_child(scenario<Key>("batches", mirror), dirs.args("kv.pool", seed), policy);
  ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
  std::filesystem::copy_file(dirs.pool_path("kv.pool"), dirs.pool_path("copy.pool"));
  // The copy's recovery is killed midway, then recovered again.
  const char* point = kRecoveryPoints[rng() % std::size(kRecoveryPoints)];
  r = gpm::test::run_child(scenario<Key>("recover", mirror), dirs.args("copy.pool", seed),
                           gpm::test::kill_at(point));
  ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
  const auto opts = quiet_options(dirs.pm_dir(), dirs.snapshot_dir());
  gpm::pool straight_pool = gpm::pool::open("kv.pool", kLayout, opts);
  auto straight = gpm::gphash<Key>::open(straight_pool, "kv", mirrored(mirror));
  gpm::pool twice_pool = gpm::pool::open("copy.pool", kLayout, opts);
  auto twice = gpm::gphash<Key>::open(twice_pool, "kv", mirrored(mirror));
  EXPECT_EQ(read_all(straight, what), read_all(twice, what))
      << what << ", recovery killed at " << point;
  EXPECT_TRUE(twice.check().ok) << what;
  EXPECT_EQ(straight.stats().top_level, twice.stats().top_level) << what;
}

TEST(GphashCrash, RecoveryIsIdempotent) {
  g_tally.print("repair points");
  const int trials = gpm::test::crash_trials(6);
  for (int t = 0; t < trials; ++t) {
    for_key_of_trial(t, [&](auto key) { recovery_trial<decltype(key)>(t); });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
