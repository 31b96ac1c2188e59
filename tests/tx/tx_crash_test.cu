// Crash tests of gpm::tx with real process crashes. A child runs batches of ATM transfers
// (unconditional, so the balances after any set of them are known) through tx_heap::launch, in
// direct mode, HCL-striped direct mode, with one or two helper warps, adaptive (switching every
// few microseconds) or undo logging in place, per thread or per warp, reporting the durable
// watermark as it goes, until it is killed with SIGKILL at a random moment or at a named crash
// point (ring drain, tail publish, apply, `applied` flip, adaptive switch, undo logged, undo
// written). Each transaction also records the
// sequence number it got in a pool array when it can. The parent reopens the pool, recovers the
// heap and checks:
//  - redo modes: the committed transactions (their marker word set) are exactly as many as the
//    recovered applied sequence number, and a transaction whose sequence number is known is
//    among them if and only if that number is within it: the state is a contiguous prefix by
//    sequence number; undo mode (durable when run() returns, no prefix): a transaction whose
//    sequence number is known returned, so it is among them;
//  - the balances equal the initial ones with exactly those transfers applied (none torn), so
//    the total is unchanged;
//  - every sequence number the child reported durable before the kill is in the prefix;
//  - recovery is idempotent: a recovery killed at its own crash points, then recovery again,
//    gives the same heap as one straight recovery.
// Trials: GPMKIT_CRASH_TRIALS (a few in CI, 1000 in the crash-long label).
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/tx/tx_heap.cuh>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "tx_test_support.hpp"

namespace {

using gpm::tx_mode;
using namespace gpm::test::tx;

constexpr char kLayout[] = "tx-crash";
constexpr std::uint32_t kBlocks = 4, kWorkers = 64, kBalance = 1000;
constexpr std::uint64_t kBatch = 256, kBatches = 24;
constexpr gpm::tx_geometry kGeometry{
    .words = 16 + kBatch * kBatches, .logs = kBlocks, .log_bytes = 1024};
// Undo mode gives each thread a slot in the logs: 4 chunks each here.
constexpr gpm::tx_geometry kUndoGeometry{
    .words = kGeometry.words, .logs = kBlocks, .log_bytes = 4096};

atm workload(std::uint64_t seed) {
  return {.accounts = 16, .transactions = kBatch * kBatches, .seed = seed, .conditional = false};
}

// How trial `seed` runs: seed % 8 picks one of the shapes (direct, hcl, one or two helper
// warps, adaptive with 1 µs slices and a threshold of about one record per slice, so that it
// switches all the time, undo); bit 8 per thread or per warp; bit 9 locked or versioned reads.
constexpr std::uint64_t kShapes = 6;
struct shape {
  gpm::tx_options options;
  unsigned tile;
  gpm::tx_geometry geometry() const {
    return options.mode == tx_mode::undo ? kUndoGeometry : kGeometry;
  }
  std::string describe() const {
    return std::string(gpm::to_string(options.mode)) +
           (options.mode == tx_mode::helpers || options.mode == tx_mode::adaptive
                ? " x" + std::to_string(options.helper_warps)
                : "") +
           ", tile " + std::to_string(tile) +
           (options.reads == gpm::tx_reads::versioned ? ", versioned reads" : "");
  }
};
shape shape_of(std::uint64_t seed) {
  constexpr tx_mode kModes[kShapes] = {tx_mode::direct,  tx_mode::hcl,      tx_mode::helpers,
                                       tx_mode::helpers, tx_mode::adaptive, tx_mode::undo};
  const std::uint64_t k = seed % 8 % kShapes;
  shape s;
  s.options.mode = kModes[k];
  s.options.helper_warps = k == 3 ? 2 : 1;
  s.options.ring_chunks = 32;
  s.options.max_threads = kBlocks * kWorkers;
  s.options.switch_threshold = 40e6;
  s.options.slice_us = 1;
  s.tile = (seed >> 8) % 2 == 0 ? 1 : 32;
  s.options.reads = (seed >> 9) % 2 == 0 ? gpm::tx_reads::locked : gpm::tx_reads::versioned;
  return s;
}
// Trial t's seed, its shape cycling through all of them.
std::uint64_t seed_of(int t) { return gpm::test::trial_seed(t) / 8 * 8 + t % kShapes; }

gpm::pool_options options_for(const gpm::test::scenario_args& a) {
  return gpm::test::quiet_options(a.pm_dir, a.snapshot_dir);
}

GPM_CRASH_SCENARIO(tx_atm) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  const shape s = shape_of(args.seed);
  gpm::tx_heap heap = gpm::tx_heap::open(p, "bank", s.geometry(), s.options);
  const atm w = workload(args.seed);
  auto* seqs = p.ref().ptr<std::uint64_t>(p.get("seqs").offset);
  gpm::device_buffer<gpm::tx_status> status(w.transactions);
  gpm::stream stream;
  gpm::test::report_progress(args, "ready");
  const auto ready = std::chrono::steady_clock::now();
  for (std::uint64_t b = 0; b < kBatches; ++b) {
    const outcome_arrays out{seqs, status.data()};
    if (s.tile == 1) {
      launch_atm<1>(heap, w, b * kBatch, kBatch, kBlocks, kWorkers, out, stream);
    } else {
      launch_atm<32>(heap, w, b * kBatch, kBatch, kBlocks, kWorkers, out, stream);
    }
    while (cudaStreamQuery(stream) == cudaErrorNotReady) {
      gpm::test::report_progress(args, "durable " + std::to_string(heap.durable_seq()));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    heap.sync(stream);
    gpm::test::report_progress(args, "durable " + std::to_string(heap.durable_seq()));
  }
  gpm::test::report_run_ms(args, ready);
  return 0;
}

GPM_CRASH_SCENARIO(tx_recover) {
  gpm::pool p = gpm::pool::open(args.pool_path, kLayout, options_for(args));
  const shape s = shape_of(args.seed);
  gpm::tx_heap::open(p, "bank", s.geometry(), s.options);
  return 0;
}

void create_bank(const gpm::test::scratch_dirs& dirs, std::uint64_t seed) {
  gpm::pool p = gpm::pool::create("bank.pool", 16 << 20, kLayout,
                                  gpm::test::quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
  const atm w = workload(seed);
  const shape s = shape_of(seed);
  auto heap = gpm::tx_heap::create(p, "bank", s.geometry(), s.options);
  const std::vector<std::uint32_t> initial = w.initial(kBalance);
  heap.store(0, initial.data(), initial.size());
  p.allocate("seqs", w.transactions * sizeof(std::uint64_t));
}

// What the trials of one test hit, printed at its end: evidence that the kills landed while
// transactions committed and that recovery had records to replay.
struct tally {
  int trials = 0, killed = 0, mid_run = 0;
  std::uint64_t acked = 0, replayed = 0, discarded = 0, rolled_back = 0, committed = 0;
  void print(const char* test) const {
    std::printf(
        "[ tally    ] %s: %d trials, %d killed (%d before the end), %llu transactions "
        "recovered, %llu records replayed, %llu discarded after a gap, %llu undo records rolled "
        "back, max acknowledged %llu\n",
        test, trials, killed, mid_run, static_cast<unsigned long long>(committed),
        static_cast<unsigned long long>(replayed), static_cast<unsigned long long>(discarded),
        static_cast<unsigned long long>(rolled_back), static_cast<unsigned long long>(acked));
  }
};
tally g_tally;

// The heap after recovery: its working copy and applied sequence number.
struct recovered {
  std::vector<std::uint32_t> words;
  gpm::tx_recovery report;
};
recovered recover(const gpm::test::scratch_dirs& dirs, const std::string& pool_name,
                  std::uint64_t seed) {
  gpm::pool p = gpm::pool::open(pool_name, kLayout,
                                gpm::test::quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
  const shape s = shape_of(seed);
  auto heap = gpm::tx_heap::open(p, "bank", s.geometry(), s.options);
  recovered r{std::vector<std::uint32_t>(s.geometry().words), heap.last_recovery()};
  heap.load(0, r.words.data(), r.words.size());
  return r;
}

void check_trial(const gpm::test::scratch_dirs& dirs, std::uint64_t seed,
                 const gpm::test::child_result& child, const std::string& what) {
  std::uint64_t acked = 0;
  for (const std::string& line : child.progress) {
    if (line.rfind("durable ", 0) == 0)
      acked = std::max<std::uint64_t>(acked, std::stoull(line.substr(8)));
  }
  const recovered r = recover(dirs, "bank.pool", seed);
  const std::uint64_t applied = r.report.applied_seq;
  std::vector<std::uint64_t> seqs(kBatch * kBatches);
  {
    gpm::pool p = gpm::pool::open("bank.pool", kLayout,
                                  gpm::test::quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
    std::memcpy(seqs.data(), p.host_ptr<std::uint64_t>(p.get("seqs").offset),
                seqs.size() * sizeof seqs[0]);
  }
  const atm w = workload(seed);
  const bool undo = shape_of(seed).options.mode == tx_mode::undo;
  std::vector<std::uint32_t> expect = w.initial(kBalance);
  std::uint64_t committed = 0;
  for (std::uint64_t i = 0; i < w.transactions; ++i) {
    const std::uint32_t marker = r.words[w.accounts + i];
    ASSERT_LE(marker, 1u) << what << ": transaction " << i << " has marker " << marker;
    if (undo && seqs[i] != 0) {
      ASSERT_EQ(marker, 1u) << what << ": transaction " << i << " with seq " << seqs[i]
                            << " returned from run() in undo mode, yet was rolled back";
    } else if (seqs[i] != 0) {
      ASSERT_EQ(marker == 1, seqs[i] <= applied)
          << what << ": transaction " << i << " with seq " << seqs[i] << " is "
          << (marker == 1 ? "in" : "not in") << " the recovered prefix of " << applied;
    }
    if (marker == 1) {
      w.apply(expect, i);
      ++committed;
    }
  }
  if (undo) {
    ASSERT_GE(committed, applied) << what << ": every commit sync() saw must be there";
  } else {
    ASSERT_EQ(committed, applied) << what << ": the prefix must hold every seq up to " << applied;
  }
  ASSERT_EQ(expect, r.words) << what << ": balances are not the initial ones plus the " << committed
                             << " recovered transfers";
  std::uint32_t total = 0;
  for (std::uint32_t a = 0; a < w.accounts; ++a) total += r.words[a];
  EXPECT_EQ(total, kBalance * w.accounts) << what;
  ASSERT_LE(acked, applied) << what << ": seq " << acked
                            << " was acknowledged durable before the crash";
  ++g_tally.trials;
  g_tally.killed += child.killed;
  g_tally.mid_run += child.killed && committed < w.transactions;
  g_tally.acked = std::max(g_tally.acked, acked);
  g_tally.replayed += r.report.replayed;
  g_tally.discarded += r.report.discarded;
  g_tally.rolled_back += r.report.rolled_back;
  g_tally.committed += committed;
}

// Milliseconds an uninterrupted run of the shape of `seed` takes after "ready" on this machine
// (once per shape and process), so that random kills land while transactions commit on a GPU
// and on the emulator alike, in fast and slow modes.
double run_ms(std::uint64_t seed) {
  static std::map<std::uint64_t, double> measured;
  const std::uint64_t shape_seed = seed % 8 % kShapes;
  const auto known = measured.find(shape_seed);
  if (known != measured.end()) return known->second;
  gpm::test::scratch_dirs dirs("tx-calibrate");
  create_bank(dirs, shape_seed);
  const double ms = gpm::test::measure_run_ms("tx_atm", dirs.args("bank.pool", shape_seed));
  measured[shape_seed] = ms;
  return ms;
}

// Steps of the protocol; the kernel's are reached many times per run, the host's fewer. On a GPU
// the kernel's crash points do nothing (crash_point.hpp): those trials run to the end.
const char* const kPoints[] = {"tx.apply", "tx.flip", "tx.drain", "tx.publish", "tx.switch"};
const char* const kUndoPoints[] = {"tx.undo.logged", "tx.undo.written"};

void atm_trial(int t, bool at_points) {
  gpm::test::scratch_dirs dirs("tx-crash");
  const std::uint64_t seed = seed_of(t);
  create_bank(dirs, seed);
  std::mt19937_64 rng(seed);
  std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ", " +
                     shape_of(seed).describe() + ")";
  gpm::test::kill_policy policy;
  if (!at_points) {
    policy = gpm::test::kill_during_run(rng, run_ms(seed));
    what += ", killed " + std::to_string(*policy.after_ms) + " ms after ready";
  } else {
    // The helpers' points exist only with helpers, the switch only in adaptive runs; undo
    // commits pass their own two.
    const tx_mode mode = shape_of(seed).options.mode;
    const std::uint64_t points = mode == tx_mode::adaptive ? 5 : mode == tx_mode::helpers ? 4 : 2;
    const std::uint64_t k = rng() % points;
    const char* point = mode == tx_mode::undo ? kUndoPoints[k] : kPoints[k];
    // The switch flips far less often than records are drained.
    const std::uint64_t nth = 1 + rng() % (k == 4 ? 8 : 60);
    policy = gpm::test::kill_at(std::string(point) + ":" + std::to_string(nth));
    what += std::string(", crash point ") + policy.crash_point;
  }
  const auto r = gpm::test::run_child("tx_atm", dirs.args("bank.pool", seed), policy);
  ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
  check_trial(dirs, seed, r, what);
}

TEST(TxCrash, RecoveredStateIsADurablePrefixAfterRandomKills) {
  g_tally = {};
  const int trials = gpm::test::crash_trials(10);
  for (int t = 0; t < trials; ++t) {
    atm_trial(t, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  g_tally.print("random kills");
}

TEST(TxCrash, RecoveredStateIsADurablePrefixAfterCrashesAtEachStep) {
  g_tally = {};
  const int trials = gpm::test::crash_trials(12);
  for (int t = 0; t < trials; ++t) {
    atm_trial(1000 + t, true);
    if (::testing::Test::HasFatalFailure()) return;
  }
  g_tally.print("crash points");
}

TEST(TxCrash, RecoveryIsIdempotent) {
  const char* const points[] = {"tx.recover.replayed", "tx.recover.flipped"};
  const int trials = gpm::test::crash_trials(5);
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs dirs("tx-idem");
    const std::uint64_t seed = seed_of(2000 + t);
    create_bank(dirs, seed);
    std::mt19937_64 rng(seed);
    const std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    auto r = gpm::test::run_child("tx_atm", dirs.args("bank.pool", seed),
                                  gpm::test::kill_during_run(rng, run_ms(seed)));
    ASSERT_TRUE(r.killed || r.exit_code == 0) << what << ": " << r.describe();
    std::filesystem::copy_file(dirs.pool_path("bank.pool"), dirs.pool_path("copy.pool"));
    const char* point = points[t % 2];
    r = gpm::test::run_child("tx_recover", dirs.args("copy.pool", seed), gpm::test::kill_at(point));
    ASSERT_TRUE(r.killed) << what << ": recovery never reached " << point;
    const recovered straight = recover(dirs, "bank.pool", seed);
    const recovered twice = recover(dirs, "copy.pool", seed);
    EXPECT_EQ(straight.report.applied_seq, twice.report.applied_seq) << what << ", " << point;
    EXPECT_EQ(straight.words, twice.words) << what << ", recovery killed at " << point;
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
