// The crash harness every module's crash tests use. A test registers scenarios, functions that
// run in a child process against a pool; the parent starts the child (a fresh exec of the test
// binary, so it works the same on the GPU and on the host emulator), kills it with SIGKILL at a
// random moment or lets it kill itself at an injected gpm::crash_point, then reopens the pool,
// runs recovery and checks the module's invariant. Seeds make every trial reproducible.
//
//   GPM_CRASH_SCENARIO(my_scenario) { ... return 0; }   // runs in the child
//   auto r = gpm::test::run_child("my_scenario", args, gpm::test::kill_after_ms(d));
//
// To spread random kills over a whole run, on a GPU and on the emulator alike, the scenario
// reports how long its run took (report_run_ms), the parent measures it once with an
// uninterrupted child (measure_run_ms) and kills each trial at a random moment of it
// (kill_during_run).
//
// Trial counts come from crash_trials(default): GPMKIT_CRASH_TRIALS overrides it, so the same
// test runs a few trials in CI and thousands in the `crash-long` label.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gpm::test {

// What a scenario receives in the child.
struct scenario_args {
  std::string pool_path;     // resolved pool file
  std::string pm_dir;        // PM directory for the pool
  std::string snapshot_dir;  // snapshot directory
  std::uint64_t seed = 0;
  int progress_fd = -1;  // write progress lines here (see report_progress)
};

using scenario_fn = int (*)(const scenario_args&);

// Registers a scenario under `name` (use GPM_CRASH_SCENARIO).
bool register_scenario(const char* name, scenario_fn fn);

#define GPM_CRASH_SCENARIO(name)                                      \
  static int name##_scenario(const ::gpm::test::scenario_args& args); \
  [[maybe_unused]] static const bool name##_registered =              \
      ::gpm::test::register_scenario(#name, &name##_scenario);        \
  static int name##_scenario(const ::gpm::test::scenario_args& args)

// Called first in main(): if this process was started as a crash child, runs the scenario and
// returns its exit code; otherwise returns nullopt.
std::optional<int> run_child_if_requested(int argc, char** argv);

// In the child: tells the parent how far the scenario got (one line per call, flushed).
void report_progress(const scenario_args& args, const std::string& line);

// How the parent ends the child.
struct kill_policy {
  std::optional<double> after_ms;  // SIGKILL after this delay (none: wait for the child)
  std::string arm_on;              // start the delay when the child reports this line (e.g.
                                   // "ready", after its CUDA context exists); empty: at spawn
  std::string crash_point;         // GPMKIT_CRASH_POINT for the child ("name" or "name:n")
  double timeout_ms = 600000;      // kill and fail if the child runs this long
};
kill_policy kill_after_ms(double ms, std::string arm_on = "");
kill_policy kill_at(const std::string& crash_point);

struct child_result {
  bool killed_by_parent = false;  // SIGKILL from the parent's timer
  bool killed = false;            // died by SIGKILL (the parent's or its own crash point)
  bool timed_out = false;
  int exit_code = -1;  // when it exited normally
  std::vector<std::string> progress;
  std::string describe() const;
};

// Starts `scenario` in a child and ends it as `policy` says.
child_result run_child(const std::string& scenario, const scenario_args& args,
                       const kill_policy& policy);

// In the child: reports "ran <ms>", the milliseconds since `ready` (when it reported "ready").
void report_run_ms(const scenario_args& args, std::chrono::steady_clock::time_point ready);
// Runs `scenario` to its end and returns the milliseconds it reported with report_run_ms (at
// least 1); a run that reported none fails the test and counts as 100 ms.
double measure_run_ms(const std::string& scenario, const scenario_args& args);
// SIGKILL at a random moment of a run that takes `run_ms` after "ready".
kill_policy kill_during_run(std::mt19937_64& rng, double run_ms);

// Trials to run: GPMKIT_CRASH_TRIALS if set, else `fallback`.
int crash_trials(int fallback);

// A seed for trial `trial` of a test: GPMKIT_CRASH_SEED (if set) mixed with the trial number,
// printed by the caller so a failing trial can be rerun alone.
std::uint64_t trial_seed(int trial);

// A private PM directory (tmpfs) and snapshot directory for one test, removed on destruction.
class scratch_dirs {
 public:
  explicit scratch_dirs(const std::string& tag);
  ~scratch_dirs();
  scratch_dirs(const scratch_dirs&) = delete;
  scratch_dirs& operator=(const scratch_dirs&) = delete;
  const std::string& pm_dir() const { return pm_dir_; }
  const std::string& snapshot_dir() const { return snapshot_dir_; }
  std::string pool_path(const std::string& name) const { return pm_dir_ + "/" + name; }
  // A child's arguments for the pool file `pool` in these directories.
  scenario_args args(const std::string& pool, std::uint64_t seed) const {
    scenario_args a;
    a.pool_path = pool_path(pool);
    a.pm_dir = pm_dir_;
    a.snapshot_dir = snapshot_dir_;
    a.seed = seed;
    return a;
  }

 private:
  std::string pm_dir_;
  std::string snapshot_dir_;
};

}  // namespace gpm::test
