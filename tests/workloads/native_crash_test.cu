// Crash tests of the native-persistence workloads (BFS, SRAD, prefix sum) with real process
// crashes. A child starts a run on a pool (or resumes it) and is killed with SIGKILL at a random
// moment; sometimes the resuming child is killed too (a crash during recovery). The parent then
// resumes the run to its end and checks:
//   - the output equals an uninterrupted run's, bit for bit;
//   - nothing the killed child reported durable was lost (the resumed run starts at or after it);
//   - only the missing work is redone: the resumed run computes exactly the steps (levels,
//     iterations, subarrays) that were not durable, so at most what was in flight is repeated.
// Every pool-based way is exercised in turn: gpm, cpu, gpm-ndp, cap-mm.
// Trials: GPMKIT_CRASH_TRIALS (tens in CI, thousands in the crash-long label).
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "workloads/native/native.hpp"

namespace {

using namespace gpmbench::native;

constexpr gpmbench::geometry kGeo{4, 64};
const way kWays[] = {way::gpm, way::cpu, way::gpm_ndp, way::cap_mm};

// Small problems: an uninterrupted run takes tens of milliseconds on the emulator, long enough
// for kills to land inside it.
bfs_config bfs_problem(way how) {
  bfs_config c;
  c.width = 256;
  c.height = 256;
  c.extra_roads = 1000;
  c.geo = kGeo;
  c.how = how;
  return c;
}
srad_config srad_problem(way how) {
  srad_config c;
  c.rows = 256;
  c.cols = 128;
  c.iterations = 48;
  c.geo = kGeo;
  c.how = how;
  return c;
}
prefix_sum_config ps_problem(way how) {
  prefix_sum_config c;
  c.arrays = 16;
  c.elements = 8192;
  c.geo = kGeo;
  c.how = how;
  return c;
}

// One workload's run, as the child and the parent call it.
using runner = std::function<run_summary(const std::string& path, const gpm::pool_options&, way,
                                         bool resume, const progress_fn&)>;

runner bfs_runner() {
  return [](const std::string& p, const gpm::pool_options& o, way w, bool resume,
            const progress_fn& f) { return run_bfs(p, o, bfs_problem(w), resume, f); };
}
runner srad_runner() {
  return [](const std::string& p, const gpm::pool_options& o, way w, bool resume,
            const progress_fn& f) { return run_srad(p, o, srad_problem(w), resume, f); };
}
runner ps_runner() {
  return [](const std::string& p, const gpm::pool_options& o, way w, bool resume,
            const progress_fn& f) { return run_prefix_sum(p, o, ps_problem(w), resume, f); };
}

gpm::pool_options options_for(const std::string& pm_dir, const std::string& snapshot_dir) {
  gpm::pool_options o;
  o.pm_dir = pm_dir;
  o.snapshot_dir = snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

// The child: seed % 4 picks the way, seed / 4 % 2 whether it resumes. Reports "ready" once the
// run's first step is durable, then "durable <steps>" after each.
int child_main(const gpm::test::scenario_args& args, const runner& run) {
  const way w = kWays[args.seed % 4];
  const bool resume = (args.seed / 4) % 2 == 1;
  bool ready = false;
  run(args.pool_path, options_for(args.pm_dir, args.snapshot_dir), w, resume,
      [&](std::uint64_t steps, const std::string&) {
        if (!ready) gpm::test::report_progress(args, "ready");
        ready = true;
        gpm::test::report_progress(args, "durable " + std::to_string(steps));
      });
  return 0;
}

GPM_CRASH_SCENARIO(native_bfs) { return child_main(args, bfs_runner()); }
GPM_CRASH_SCENARIO(native_srad) { return child_main(args, srad_runner()); }
GPM_CRASH_SCENARIO(native_prefix_sum) { return child_main(args, ps_runner()); }

// The most steps a killed child reported durable.
std::uint64_t last_durable(const gpm::test::child_result& r) {
  std::uint64_t steps = 0;
  for (const std::string& line : r.progress) {
    if (line.rfind("durable ", 0) == 0)
      steps = std::max<std::uint64_t>(steps, std::stoull(line.substr(8)));
  }
  return steps;
}

void crash_and_resume(const char* scenario, const runner& run, int default_trials) {
  // The references: an uninterrupted run per way, and how long it takes (to spread the kills
  // over it). Ways may differ in floating-point contraction on a GPU, so each has its own.
  gpm::test::scratch_dirs ref_dirs(std::string(scenario) + "-ref");
  const gpm::pool_options ref_options = options_for(ref_dirs.pm_dir(), ref_dirs.snapshot_dir());
  run_summary refs[4];
  for (int i = 0; i < 4; ++i) {
    refs[i] = run("ref-" + mode_name(kWays[i]), ref_options, kWays[i], false, {});
  }

  std::uint64_t durable_at_crash = 0, redone = 0, completed_before_kill = 0;
  const int trials = gpm::test::crash_trials(default_trials);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    const way w = kWays[t % 4];
    const run_summary& ref = refs[t % 4];
    const double run_ms = std::max(1.0, ref.seconds * 1e3);
    const std::string what = std::string(scenario) + " trial " + std::to_string(t) + " (seed " +
                             std::to_string(seed) + ", " + mode_name(w) + ")";
    gpm::test::scratch_dirs d(scenario);
    gpm::test::scenario_args a = d.args("run.pool", 0);  // seed set per child below
    std::uint64_t reported = 0;
    // First child starts the run; with probability 1/2 a second child resumes and is killed too.
    const int kills = 1 + static_cast<int>(rng() % 2);
    for (int k = 0; k < kills; ++k) {
      a.seed = static_cast<std::uint64_t>(t % 4) + (k == 0 ? 0 : 4);
      const double after = std::uniform_real_distribution<double>(0, 0.8 * run_ms)(rng);
      const gpm::test::child_result r =
          gpm::test::run_child(scenario, a, gpm::test::kill_after_ms(after, "ready"));
      ASSERT_FALSE(r.timed_out) << what << ": " << r.describe();
      ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
      if (!r.killed) ++completed_before_kill;
      reported = std::max(reported, last_durable(r));
    }
    const run_summary resumed =
        run("run.pool", options_for(d.pm_dir(), d.snapshot_dir()), w, true, {});
    EXPECT_EQ(resumed.output_checksum, ref.output_checksum)
        << what << ": the resumed run's output differs from an uninterrupted run's";
    EXPECT_GE(resumed.steps_at_start, reported)
        << what << ": a step the child reported durable was lost";
    EXPECT_EQ(resumed.steps_total, ref.steps_total) << what;
    EXPECT_EQ(resumed.steps_run, resumed.steps_total - resumed.steps_at_start)
        << what << ": the resumed run redid durable work";
    durable_at_crash += resumed.steps_at_start;
    redone += resumed.steps_run;
  }
  // The record of how much work crashes cost: steps found durable vs steps computed again.
  std::printf(
      "%s: %d trials (%llu finished before their kill); %llu steps were durable at the "
      "crashes and kept, %llu recomputed on resume, of %llu steps per run\n",
      scenario, trials, static_cast<unsigned long long>(completed_before_kill),
      static_cast<unsigned long long>(durable_at_crash), static_cast<unsigned long long>(redone),
      static_cast<unsigned long long>(refs[0].steps_total));
}

TEST(NativeCrash, BfsResumesAtThePublishedLevel) {
  crash_and_resume("native_bfs", bfs_runner(), 24);
}

TEST(NativeCrash, SradResumesAtThePublishedIteration) {
  crash_and_resume("native_srad", srad_runner(), 24);
}

TEST(NativeCrash, PrefixSumRecomputesOnlyIncompleteSubarrays) {
  crash_and_resume("native_prefix_sum", ps_runner(), 24);
}

}  // namespace
