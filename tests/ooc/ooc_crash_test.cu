// Crash tests of crash-consistent sync (mapping_options::crash_consistent) with real process
// crashes. A child maps a file crash-consistently through caches far smaller than it (lines are
// staged and re-read all the time) and runs epochs: a kernel rewrites the array with a pattern
// that names the epoch (read_write: every element from its old value; write: two thirds of the
// elements, a mask per line), then sync() commits the epoch; it reports each epoch sync()
// returned. It is killed with SIGKILL at a random moment (mostly inside kernels) or at a named
// crash point: a miss in flight (ooc.fill, kernels on the host backend), a line staged
// (ooc.spill), a record appended (ooc.log.append), records written but not committed
// (ooc.log.written), right after the commit (ooc.log.committed), mid write-back (ooc.apply), after
// the data fdatasync (ooc.applied), after the publish (ooc.published). The parent recovers (by
// mapping the file, or with recover_epoch_log) and checks:
//  - the file equals exactly the contents of epoch E, E the epoch its log names;
//  - E is the last epoch the child saw sync() return, or the one after it (never older: a
//    returned sync is durable; never later: nothing past it ran);
//  - recovery is idempotent: a recovery killed mid-write-back or mid-publish, then recovery
//    again, gives the same file and epoch as one straight recovery.
// Half the trials map the file resident (a 16-line GPU cache holds it whole, so kernels access it
// directly; the 6-line host cache does not, so sync stages lines). Half stripe the array line by
// line over three files (one epoch log, beside the first, commits each epoch in all three); "the
// file" is then the array the three hold.
// Trials: GPMKIT_CRASH_TRIALS (a few hundred in CI, thousands in the crash-long label).
#include <chrono>
#include <filesystem>
#include <random>

#include <gpm/ooc/epoch.hpp>
#include <gpm/platform/crash_point.hpp>

#include "ooc_test_util.hpp"

namespace {

using namespace gpm::test::ooc;
using gpm::ooc::mapping;

namespace fs = std::filesystem;

constexpr std::uint64_t kLines = 16;
constexpr std::uint32_t kEpochs = 3;
constexpr unsigned kCrashBlocks = 4, kCrashThreads = 64;

// Epoch e's pattern. read_write: every element from its old value; write: the elements that
// `written` names, from their index alone.
GPM_HOST_DEVICE inline std::uint32_t next_value(std::uint32_t old, std::uint32_t e) {
  return old * 2654435761u + e;
}
GPM_HOST_DEVICE inline bool written(std::uint64_t i, std::uint32_t e) { return (i * 7 + e) % 3 != 0; }
GPM_HOST_DEVICE inline std::uint32_t written_value(std::uint64_t i, std::uint32_t e) {
  return static_cast<std::uint32_t>(i * 40503u) ^ (e << 24);
}

__global__ void epoch_kernel(gpm::ooc::array<std::uint32_t> a, std::uint32_t e, bool write_only,
                             unsigned* failures) {
  for (std::uint64_t i : gpm::grid_stride(a.size())) {
    status st = status::ok;
    if (write_only) {
      if (written(i, e)) st = a.set(i, written_value(i, e));
    } else {
      std::uint32_t v = 0;
      st = a.get(i, v);
      if (st == status::ok) st = a.set(i, next_value(v, e));
    }
    if (st != status::ok) atomicAdd(failures, 1u);
  }
}

bool write_only(std::uint64_t seed) { return seed % 2 == 1; }
bool resident(std::uint64_t seed) { return seed / 4 % 2 == 1; }
bool striped(std::uint64_t seed) { return seed / 8 % 2 == 1; }

// The files of trial `seed` whose first is `path`.
std::vector<std::string> files_of(const std::string& path, std::uint64_t seed) {
  if (!striped(seed)) return {path};
  return {path, path + ".1", path + ".2"};
}
constexpr std::uint64_t kStripeLines = (kLines + 2) / 3;  // the most lines a stripe file holds

// The array the files hold.
std::vector<unsigned char> read_data(const std::string& path, std::uint64_t seed) {
  std::vector<std::vector<unsigned char>> files;
  for (const std::string& f : files_of(path, seed)) files.push_back(read_file(f));
  for (const auto& f : files) {
    if (f.size() < (files.size() == 1 ? lines(kLines) : lines(kStripeLines))) return files[0];
  }
  return gather(files, 0, lines(kLines));
}

gpm::ooc::mapping_options options_for(std::uint64_t seed) {
  gpm::ooc::mapping_options o =
      tiny(write_only(seed) ? mode::write : mode::read_write, resident(seed) ? kLines : 4, 6);
  o.crash_consistent = true;
  return o;
}

std::vector<unsigned char> initial(std::uint64_t seed) { return pattern(lines(kLines), seed); }

// The file after epochs 1..e.
std::vector<unsigned char> contents(std::uint64_t seed, std::uint64_t e) {
  auto v = as<std::uint32_t>(initial(seed));
  for (std::uint32_t k = 1; k <= e; ++k) {
    for (std::uint64_t i = 0; i < v.size(); ++i) {
      if (!write_only(seed)) {
        v[i] = next_value(v[i], k);
      } else if (written(i, k)) {
        v[i] = written_value(i, k);
      }
    }
  }
  std::vector<unsigned char> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Where `file` differs from epoch e's contents, for a failure message: how many elements, in which
// lines, and the first one's value, with the epochs whose value it is (none: zeros or bytes of no
// epoch, as a write-mode line logged whole would leave).
std::string difference(const std::vector<unsigned char>& file, std::uint64_t seed, std::uint64_t e) {
  const auto want = contents(seed, e);
  if (file.size() != want.size()) {
    return "the file has " + std::to_string(file.size()) + " bytes, not " +
           std::to_string(want.size());
  }
  const auto got = as<std::uint32_t>(file);
  const auto expect = as<std::uint32_t>(want);
  std::uint64_t differ = 0, first = 0, last_line = ~0ull;
  std::string where;
  for (std::uint64_t i = 0; i < got.size(); ++i) {
    if (got[i] == expect[i]) continue;
    if (differ++ == 0) first = i;
    const std::uint64_t line = i * 4 / line_size();
    if (line != last_line) where += " " + std::to_string(line);
    last_line = line;
  }
  std::string epochs;
  for (std::uint64_t k = 0; k <= kEpochs; ++k) {
    if (as<std::uint32_t>(contents(seed, k))[first] == got[first]) epochs += " " + std::to_string(k);
  }
  return std::to_string(differ) + " elements differ, in lines" + where + "; element " +
         std::to_string(first) + " holds " + std::to_string(got[first]) + " (epoch " +
         std::to_string(e) + ": " + std::to_string(expect[first]) + "), the value of epochs:" +
         (epochs.empty() ? " none" : epochs);
}

GPM_CRASH_SCENARIO(ooc_epochs) {
  mapping m(files_of(args.pool_path, args.seed), lines(kLines), 0, options_for(args.seed));
  auto a = m.ref<std::uint32_t>();
  gpm::device_buffer<unsigned> failures(1);
  failures.fill_bytes(0);
  const std::uint64_t first = m.stats().epoch + 1;
  gpm::test::report_progress(args, "ready");
  const auto ready = std::chrono::steady_clock::now();
  for (std::uint64_t e = first; e < first + kEpochs; ++e) {
    gpm::launch(epoch_kernel, kCrashBlocks, kCrashThreads, 0, nullptr, a,
                static_cast<std::uint32_t>(e), write_only(args.seed), failures.data());
    gpm::check_cuda(cudaDeviceSynchronize(), "epoch_kernel");
    m.sync();
    gpm::test::report_progress(args, "synced " + std::to_string(e));
  }
  gpm::test::report_run_ms(args, ready);
  return gpm::test::to_host(failures)[0] == 0 ? 0 : 3;
}

GPM_CRASH_SCENARIO(ooc_recover) {
  gpm::ooc::recover_epoch_log(args.pool_path);
  return 0;
}

// What the trials of one test hit, printed at its end: evidence that kills landed in every phase.
struct tally {
  int trials = 0, killed = 0, mid_run = 0, at_acked = 0, one_past = 0, replayed = 0,
      discarded = 0;
  void print(const char* test) const {
    std::printf(
        "[ tally    ] %s: %d trials, %d killed (%d before the last epoch), file at the last "
        "acknowledged epoch %d times, one past it %d times; recovery replayed a committed "
        "epoch %d times, dropped an uncommitted one %d times\n",
        test, trials, killed, mid_run, at_acked, one_past, replayed, discarded);
  }
};
tally g_tally;

// A fresh data file for trial `seed` (epoch 0) in `dirs`' tmpfs directory: a process crash
// leaves tmpfs as it leaves a disk's page cache, and trials do not wait for a disk's fdatasync
// (ooc_epoch_test runs the protocol on a disk).
std::string make_file(const gpm::test::scratch_dirs& dirs, std::uint64_t seed) {
  const std::string path = dirs.pm_dir() + "/data.bin";
  const std::vector<std::string> paths = files_of(path, seed);
  if (paths.size() == 1) {
    write_file(path, initial(seed));
  } else {
    std::vector<std::vector<unsigned char>> files(paths.size(),
                                                  std::vector<unsigned char>(lines(kStripeLines)));
    scatter(files, 0, initial(seed));
    for (std::size_t k = 0; k < paths.size(); ++k) write_file(paths[k], files[k]);
  }
  return path;
}

gpm::test::scenario_args args_for(const gpm::test::scratch_dirs& dirs, const std::string& path,
                                  std::uint64_t seed) {
  gpm::test::scenario_args a = dirs.args("unused", seed);
  a.pool_path = path;
  return a;
}

// Recovers `path` (by mapping it, or with recover_epoch_log) and returns its epoch afterwards.
std::uint64_t recover(const std::string& path, std::uint64_t seed, bool by_mapping) {
  gpm::ooc::epoch_recovery r;
  if (by_mapping) {
    mapping m(files_of(path, seed), lines(kLines), 0, options_for(seed));
    r = m.last_recovery();
  } else {
    r = gpm::ooc::recover_epoch_log(path);
  }
  g_tally.replayed += r.replayed;
  g_tally.discarded += r.discarded_bytes > 0;
  EXPECT_EQ(gpm::ooc::inspect_epoch_log(path).epoch, r.epoch);
  return r.epoch;
}

void check_trial(const std::string& path, std::uint64_t seed,
                 const gpm::test::child_result& child, const std::string& what) {
  ASSERT_TRUE(child.killed || child.exit_code == 0) << what << ": " << child.describe();
  std::uint64_t acked = 0;
  for (const std::string& line : child.progress) {
    if (line.rfind("synced ", 0) == 0) acked = std::stoull(line.substr(7));
  }
  const bool by_mapping = seed % 4 < 2;
  const std::uint64_t e = recover(path, seed, by_mapping);
  ASSERT_TRUE(e == acked || e == acked + 1)
      << what << ": the file is at epoch " << e << " but sync() had returned epoch " << acked;
  ASSERT_LE(e, kEpochs) << what;
  const auto file = read_data(path, seed);
  ASSERT_TRUE(file == contents(seed, e))
      << what << ": the file is not exactly epoch " << e << "'s contents after recovery "
      << (by_mapping ? "by mapping" : "by recover_epoch_log") << ": " << difference(file, seed, e);
  ++g_tally.trials;
  g_tally.killed += child.killed;
  g_tally.mid_run += child.killed && e < kEpochs;
  g_tally.at_acked += e == acked;
  g_tally.one_past += e == acked + 1;
}

// Milliseconds an uninterrupted run takes after "ready" (once per process), so that random kills
// land within the run on a GPU and on the emulator alike.
double run_ms() {
  static const double ms = [] {
    gpm::test::scratch_dirs dirs("ooc-calibrate");
    const std::string path = make_file(dirs, 0);
    return gpm::test::measure_run_ms("ooc_epochs", args_for(dirs, path, 0));
  }();
  return ms;
}

// Each point with how many times a run reaches it at least (the n-th time is chosen at random up
// to that): the kernels' and the staging points many times, the sync's once per epoch or record.
struct point {
  const char* name;
  unsigned reached;
};
const point kPoints[] = {
    {"ooc.fill", 40},      {"ooc.spill", 20},         {"ooc.log.append", 3 * kEpochs},
    {"ooc.log.written", kEpochs}, {"ooc.log.committed", kEpochs}, {"ooc.apply", 3 * kEpochs},
    {"ooc.applied", kEpochs},     {"ooc.published", kEpochs},
};

void epoch_trial(int t, bool at_points) {
  gpm::test::scratch_dirs dirs("ooc-crash");
  const std::uint64_t seed = gpm::test::trial_seed(t);
  const std::string path = make_file(dirs, seed);
  std::mt19937_64 rng(seed);
  std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ", " +
                     (write_only(seed) ? "write" : "read_write") +
                     (resident(seed) ? ", resident" : "") +
                     (striped(seed) ? ", striped over 3 files" : "") + ")";
  gpm::test::kill_policy policy;
  if (!at_points) {
    policy = gpm::test::kill_during_run(rng, run_ms());
    what += ", killed " + std::to_string(*policy.after_ms) + " ms after ready";
  } else {
    const point& p = kPoints[rng() % std::size(kPoints)];
    policy = gpm::test::kill_at(std::string(p.name) + ":" + std::to_string(1 + rng() % p.reached));
    what += ", crash point " + policy.crash_point;
  }
  const auto r = gpm::test::run_child("ooc_epochs", args_for(dirs, path, seed), policy);
  check_trial(path, seed, r, what);
}

TEST(OocCrash, FileIsAtTheLastOrNextEpochAfterRandomKills) {
  g_tally = {};
  const int trials = gpm::test::crash_trials(100);
  for (int t = 0; t < trials; ++t) {
    epoch_trial(t, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  g_tally.print("random kills");
}

TEST(OocCrash, FileIsAtTheLastOrNextEpochAfterCrashesAtEachStep) {
  g_tally = {};
  const int trials = gpm::test::crash_trials(100);
  for (int t = 0; t < trials; ++t) {
    epoch_trial(100000 + t, true);
    if (::testing::Test::HasFatalFailure()) return;
  }
  g_tally.print("crash points");
}

TEST(OocCrash, RecoveryIsIdempotent) {
  const point points[] = {{"ooc.apply", kLines}, {"ooc.applied", 1}, {"ooc.published", 1}};
  g_tally = {};
  const int trials = gpm::test::crash_trials(30);
  int killed = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs dirs("ooc-idem");
    // One file: the copy below moves a file and its log, and a striped log names its files.
    std::uint64_t seed = gpm::test::trial_seed(200000 + t);
    if (striped(seed)) seed += 8;
    const std::string path = make_file(dirs, seed);
    std::mt19937_64 rng(seed);
    // A committed epoch waiting in the log.
    const auto committed = gpm::test::kill_at("ooc.log.committed:" + std::to_string(1 + rng() % kEpochs));
    const std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ", " +
                             committed.crash_point + ")";
    auto r = gpm::test::run_child("ooc_epochs", args_for(dirs, path, seed), committed);
    ASSERT_TRUE(r.killed) << what << ": " << r.describe();
    // The same file, log and staging file (whose lines the log's records may name) in the other
    // directory (the log names the file, not its directory).
    const std::string copy = dirs.snapshot_dir() + "/data.bin";
    fs::copy_file(path, copy);
    fs::copy_file(gpm::ooc::epoch_log_path(path), gpm::ooc::epoch_log_path(copy));
    const std::string staging = gpm::ooc::epoch_log_path(path) + ".staged";
    if (fs::exists(staging)) fs::copy_file(staging, gpm::ooc::epoch_log_path(copy) + ".staged");
    const point& p = points[t % std::size(points)];
    const std::string at = std::string(p.name) + ":" + std::to_string(1 + rng() % p.reached);
    r = gpm::test::run_child("ooc_recover", args_for(dirs, copy, seed), gpm::test::kill_at(at));
    ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ", recovery at " << at << ": " << r.describe();
    killed += r.killed;
    const std::uint64_t straight = recover(path, seed, false);
    const std::uint64_t twice = recover(copy, seed, true);
    EXPECT_EQ(straight, twice) << what << ", recovery killed at " << at;
    EXPECT_TRUE(read_file(path) == read_file(copy)) << what << ", recovery killed at " << at;
    EXPECT_TRUE(read_file(path) == contents(seed, straight))
        << what << ": " << difference(read_file(path), seed, straight);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("[ tally    ] recovery: %d trials, recovery killed %d times, %d replays\n", trials,
              killed, g_tally.replayed);
}

}  // namespace
