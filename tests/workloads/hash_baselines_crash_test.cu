// Crash tests of the YCSB comparison indexes (bench/workloads/ycsb) with real process crashes:
// a child updates every key and inserts new keys in rounds, reporting each finished round; it is
// killed (SIGKILL) at a random moment. The parent reopens the pool and the index (recovery) and
// checks the invariant: every key holds an intact value of the last finished round or of the
// round in flight; keys inserted by finished rounds are present, keys of later rounds absent,
// keys of the round in flight present or absent. Recovery is run twice to show it idempotent.
// Trials: GPMKIT_CRASH_TRIALS (a few in CI, thousands in the crash-long label).
#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "hash_baselines_support.hpp"
#include "workloads/ycsb/clevel_index.cuh"
#include "workloads/ycsb/slab_index.cuh"

namespace {

using namespace gpmbench::ycsb;
using gpmbench::geometry;

constexpr char kLayout[] = "hash-baselines-crash";
constexpr geometry kLaunch{4, 64};
constexpr std::uint64_t kKeys = 512;     // updated every round
constexpr std::uint64_t kPerRound = 64;  // inserted every round
constexpr std::uint64_t kRounds = 48;    // the child's rounds (the record heap holds them all)
constexpr std::uint64_t kRecords = kKeys + kRounds * (kKeys + kPerRound) + 64;

template <class Index>
std::uint64_t pool_bytes_of();
template <>
std::uint64_t pool_bytes_of<clevel_index<key8>>() {
  return clevel_index<key8>::pool_bytes(kKeys + kRounds * kPerRound, kRecords) + (4 << 20);
}
template <>
std::uint64_t pool_bytes_of<slab_index<key8>>() {
  return slab_index<key8>::pool_bytes(kKeys + kRounds * kPerRound, kRecords,
                                      kLaunch.blocks * kLaunch.threads / 32) +
         (4 << 20);
}

// Round r >= 1: every key [0, kKeys) updated to version r, keys of round r inserted.
std::vector<kv_op> round_ops(std::uint64_t r) {
  std::vector<kv_op> ops;
  for (std::uint64_t id = 0; id < kKeys; ++id) {
    ops.push_back({id, op_kind::update, static_cast<std::uint32_t>(r)});
  }
  for (std::uint64_t j = 0; j < kPerRound; ++j) {
    ops.push_back(
        {kKeys + (r - 1) * kPerRound + j, op_kind::insert, static_cast<std::uint32_t>(r)});
  }
  return ops;
}

template <class Index>
int churn(const gpm::test::scenario_args& args) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout,
                                gpm::test::quiet_options(args.pm_dir, args.snapshot_dir));
  const Index index = Index::open(p, "t", kLaunch);
  gpm::test::report_progress(args, "ready");
  for (std::uint64_t r = 1; r <= kRounds; ++r) {
    std::vector<op_status> st;
    gpm::test::run_batch(index, round_ops(r), &st, nullptr);
    for (op_status s : st) {
      if (s != op_status::ok) return 3;  // the parent reports a child that exits
    }
    gpm::test::report_progress(args, "round " + std::to_string(r));
  }
  return 0;
}

GPM_CRASH_SCENARIO(clevel_churn) { return churn<clevel_index<key8>>(args); }
GPM_CRASH_SCENARIO(slab_churn) { return churn<slab_index<key8>>(args); }

// Finds every key the child may have touched; returns (status, version) per id.
template <class Index>
void read_all(const Index& index, std::vector<op_status>* st, std::vector<std::uint64_t>* ver) {
  std::vector<kv_op> finds;
  for (std::uint64_t id = 0; id < kKeys + kRounds * kPerRound; ++id) {
    finds.push_back({id, op_kind::find, 0});
  }
  gpm::test::run_batch(index, finds, st, ver);
}

template <class Index>
void crash_trials(const char* scenario) {
  const int trials = gpm::test::crash_trials(4);
  int mid_run = 0;
  // Trial 0 runs the child to its end and measures how long that takes, so that the kill
  // delays of the other trials fall inside the rounds on any machine (emulator or GPU).
  double full_run_ms = 0;
  for (int t = 0; t <= trials; ++t) {
    gpm::test::scratch_dirs d(scenario);
    const gpm::pool_options o = gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir());
    {
      gpm::pool p = gpm::pool::create("c.pool", pool_bytes_of<Index>(), kLayout, o);
      const Index index = Index::create(p, "t", kKeys + kRounds * kPerRound, kRecords, kLaunch);
      std::vector<kv_op> load;
      for (std::uint64_t id = 0; id < kKeys; ++id) load.push_back({id, op_kind::insert, 0});
      gpm::test::run_batch(index, load, nullptr, nullptr);
    }
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const double delay = t == 0 ? 0 : std::uniform_real_distribution<double>(0, full_run_ms)(rng);
    const gpm::test::scenario_args a = d.args("c.pool", seed);
    const auto start = std::chrono::steady_clock::now();
    const auto r = gpm::test::run_child(
        scenario, a, t == 0 ? gpm::test::kill_policy{} : gpm::test::kill_after_ms(delay, "ready"));
    if (t == 0) {
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      full_run_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    }
    ASSERT_TRUE(r.killed_by_parent || r.exit_code == 0) << r.describe();
    std::uint64_t done = 0;  // the last round the child finished
    for (const std::string& line : r.progress) {
      if (line.rfind("round ", 0) == 0) done = std::stoull(line.substr(6));
    }
    mid_run += r.killed_by_parent && done < kRounds;

    gpm::pool p = gpm::pool::open("c.pool", kLayout, o);
    std::vector<op_status> st, st2;
    std::vector<std::uint64_t> ver, ver2;
    {
      const Index index = Index::open(p, "t", kLaunch);  // recovers
      read_all(index, &st, &ver);
    }
    {
      const Index index = Index::open(p, "t", kLaunch);  // recovers again: nothing changes
      read_all(index, &st2, &ver2);
    }
    const std::string where = std::string("trial ") + std::to_string(t) + " (seed " +
                              std::to_string(seed) + ", killed after " + std::to_string(delay) +
                              " ms, " + std::to_string(done) + " rounds done): ";
    for (std::uint64_t id = 0; id < st.size(); ++id) {
      ASSERT_EQ(st[id], st2[id]) << where << "a second recovery changed key " << id;
      ASSERT_EQ(ver[id], ver2[id]) << where << "a second recovery changed key " << id;
      if (id < kKeys) {
        ASSERT_EQ(st[id], op_status::ok) << where << "key " << id << ": " << to_string(st[id]);
        ASSERT_TRUE(ver[id] == done || ver[id] == done + 1)
            << where << "key " << id << " holds version " << ver[id];
        continue;
      }
      const std::uint64_t round = (id - kKeys) / kPerRound + 1;
      if (round <= done) {
        ASSERT_EQ(st[id], op_status::ok)
            << where << "key " << id << " of a finished round: " << to_string(st[id]);
        ASSERT_EQ(ver[id], round) << where << "key " << id;
      } else if (round == done + 1) {
        ASSERT_TRUE(st[id] == op_status::ok || st[id] == op_status::not_found)
            << where << "key " << id << " of the round in flight: " << to_string(st[id]);
      } else {
        ASSERT_EQ(st[id], op_status::not_found) << where << "key " << id << " of a later round";
      }
    }
    // The recovered index keeps working.
    const Index index = Index::open(p, "t", kLaunch);
    std::vector<op_status> after;
    gpm::test::run_batch(index, {{0, op_kind::update, 999}, {1ull << 40, op_kind::insert, 1}},
                         &after, nullptr);
    ASSERT_EQ(after[0], op_status::ok) << where;
    ASSERT_EQ(after[1], op_status::ok) << where;
  }
  EXPECT_GT(mid_run, 0) << "no trial killed the child in the middle of its rounds";
}

TEST(HashBaselinesCrash, ClevelKeepsEveryKeyIntactAcrossCrashes) {
  crash_trials<clevel_index<key8>>("clevel_churn");
}

TEST(HashBaselinesCrash, SlabUndoLogRestoresTornUpdatesAcrossCrashes) {
  crash_trials<slab_index<key8>>("slab_churn");
}

}  // namespace
