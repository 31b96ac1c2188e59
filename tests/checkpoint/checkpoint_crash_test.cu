// Crash tests of gpm::checkpointer with real process crashes, on both backends. A child runs a
// deterministic training loop on the GPU (integer arithmetic, so that the host can recompute
// every iteration's state bit for bit) and checkpoints it every few iterations, with the
// HeteroCheckpoint optimisations on: a read-only input chunk (redundant after a few checkpoints),
// a chunk that stops changing early in each iteration (pre-copied), synchronous and asynchronous
// checkpoints. The parent kills it with SIGKILL at a random moment or at an injected crash point
// inside the checkpoint protocol, then checks:
//  - the restored state is bit-identical to a completed checkpoint: the last one the child
//    reported, or a later one it completed but had not reported yet (a kill mid-checkpoint
//    leaves the one before);
//  - resuming from it reaches the same final state as an uninterrupted run.
// Trials: GPMKIT_CRASH_TRIALS (tens by default, thousands in the crash-long label).
#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"

namespace {

constexpr char kLayout[] = "checkpoint-crash";
constexpr std::uint64_t kFinalIteration = 60;
#if GPM_BACKEND_CUDA
constexpr std::uint64_t kWeights = 1 << 20;  // 8 MiB on a GPU: kills land inside copies
#else
constexpr std::uint64_t kWeights = 1 << 12;  // 32 KiB on the emulator
#endif
constexpr std::uint64_t kInput = kWeights / 2;
constexpr std::uint64_t kFeatures = kWeights / 4;

// One "training" iteration: features are derived from the input and the weights (and then stay
// fixed for the iteration), the weights are updated from the features, and the step counter moves.
__host__ __device__ inline std::uint64_t feature(const std::uint64_t* input, const std::uint64_t* w,
                                                 std::uint64_t i, std::uint64_t it) {
  return gpm::mix64(input[i % kInput] ^ w[(i * 7) % kWeights] ^ it);
}
__host__ __device__ inline std::uint64_t updated(std::uint64_t w, std::uint64_t f,
                                                 std::uint64_t i) {
  return gpm::mix64(w + f + i) | 1;
}

__global__ void features_kernel(const std::uint64_t* input, const std::uint64_t* w,
                                std::uint64_t* feat, std::uint64_t it) {
  for (std::uint64_t i : gpm::grid_stride(kFeatures))
    feat[i] = feature(input, w, i, it);
}
__global__ void update_kernel(std::uint64_t* w, const std::uint64_t* feat, std::uint64_t* step) {
  for (std::uint64_t i : gpm::grid_stride(kWeights))
    w[i] = updated(w[i], feat[i % kFeatures], i);
  if (blockIdx.x == 0 && threadIdx.x == 0) *step += 1;
}

struct state {
  std::vector<std::uint64_t> input, weights, features;
  std::uint64_t step = 0;
};

state initial_state() {
  state s;
  s.input.resize(kInput);
  s.weights.resize(kWeights);
  s.features.assign(kFeatures, 0);
  for (std::uint64_t i = 0; i < kInput; ++i) s.input[i] = gpm::splitmix64(i);
  for (std::uint64_t i = 0; i < kWeights; ++i) s.weights[i] = gpm::splitmix64(i + (1ull << 40));
  return s;
}

// The host's replay: the state after `iterations` iterations.
state reference(std::uint64_t iterations) {
  state s = initial_state();
  for (std::uint64_t it = 0; it < iterations; ++it) {
    for (std::uint64_t i = 0; i < kFeatures; ++i)
      s.features[i] = feature(s.input.data(), s.weights.data(), i, it);
    for (std::uint64_t i = 0; i < kWeights; ++i)
      s.weights[i] = updated(s.weights[i], s.features[i % kFeatures], i);
    ++s.step;
  }
  return s;
}

// The training state in GPU memory, registered with a checkpointer.
struct gpu_state {
  gpm::device_buffer<std::uint64_t> input{kInput}, weights{kWeights}, features{kFeatures};
  gpm::device_buffer<std::uint64_t> step{1};

  explicit gpu_state(const state& s) {
    input.copy_from_host(s.input.data(), kInput);
    weights.copy_from_host(s.weights.data(), kWeights);
    features.copy_from_host(s.features.data(), kFeatures);
    step.copy_from_host(&s.step, 1);
  }
  void add_to(gpm::checkpointer& cp) {
    // Registration order differs from run to run on purpose: chunks are found by name.
    cp.add("step", step.data(), 1);
    cp.add("features", features.data(), kFeatures);
    cp.add("weights", weights.data(), kWeights);
    cp.add("input", input.data(), kInput);
  }
  state to_host() const {
    state s;
    s.input = gpm::test::to_host(input);
    s.weights = gpm::test::to_host(weights);
    s.features = gpm::test::to_host(features);
    step.copy_to_host(&s.step, 1);
    return s;
  }
};

gpm::pool_options options_for(const std::string& pm_dir, const std::string& snapshot_dir) {
  gpm::pool_options o;
  o.pm_dir = pm_dir;
  o.snapshot_dir = snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

gpm::checkpoint_options checkpoint_options_for(std::uint64_t seed) {
  gpm::checkpoint_options o;
  o.path = seed % 2 == 0 ? gpm::copy_path::gpu_stores : gpm::copy_path::dma;
  o.notice = [](const std::string&) {};
  return o;
}

// Trains from the last checkpoint (or the start) to kFinalIteration, checkpointing every
// `interval` iterations; reports "checkpointed <iterations>" once each checkpoint is durable.
GPM_CRASH_SCENARIO(train) {
  gpm::pool p =
      gpm::pool::open(args.pool_path, kLayout, options_for(args.pm_dir, args.snapshot_dir));
  gpm::checkpointer cp =
      gpm::checkpointer::open_or_create(p, "train", checkpoint_options_for(args.seed));
  gpu_state g(initial_state());
  g.add_to(cp);
  if (cp.last_checkpoint() > 0) cp.restore();
  std::uint64_t it = g.to_host().step;
  const std::uint64_t interval = 1 + args.seed % 3;
  const bool async = (args.seed / 3) % 2 == 1;
  gpm::stream s;
  gpm::test::report_progress(args, "ready");
  while (it < kFinalIteration) {
    gpm::launch(features_kernel, 8, 128, 0, s, g.input.data(), g.weights.data(), g.features.data(),
                it);
    const bool checkpoint_now = (it + 1) % interval == 0;
    if (checkpoint_now) cp.precopy("features", s);  // final for this iteration
    gpm::launch(update_kernel, 8, 128, 0, s, g.weights.data(), g.features.data(), g.step.data());
    ++it;
    if (!checkpoint_now) continue;
    if (async) {
      cp.checkpoint_async(0, s).get();
    } else {
      cp.checkpoint(0, s);
    }
    gpm::test::report_progress(args, "checkpointed " + std::to_string(it));
  }
  s.synchronize();
  gpm::test::report_progress(args, "done");
  return 0;
}

std::uint64_t last_reported(const gpm::test::child_result& r) {
  std::uint64_t last = 0;
  for (const std::string& line : r.progress) {
    if (line.rfind("checkpointed ", 0) == 0) last = std::stoull(line.substr(13));
  }
  return last;
}

void expect_state(const state& got, std::uint64_t iterations, const std::string& what) {
  const state want = reference(iterations);
  ASSERT_EQ(got.step, want.step) << what;
  ASSERT_EQ(got.input, want.input) << what << ": input";
  ASSERT_EQ(got.weights, want.weights) << what << ": weights after " << iterations;
  ASSERT_EQ(got.features, want.features) << what << ": features after " << iterations;
}

const char* const kCrashPoints[] = {
    "checkpoint.add.copies_allocated",    // first registration, before the entry exists
    "checkpoint.copied",                  // working copies written, not flipped
    "checkpoint.record.entries_written",  // the flip torn halfway
    "checkpoint.committed",               // flipped, not reported
};

std::uint64_t pool_bytes() { return 4 * kWeights * 8 + (4 << 20); }

// How long an uninterrupted run takes from "ready" to its end, so that random kills fall inside
// the run on any machine and backend.
double run_ms() {
  gpm::test::scratch_dirs d("cpcal");
  gpm::pool::create("t.pool", pool_bytes(), kLayout, options_for(d.pm_dir(), d.snapshot_dir()))
      .close();
  const auto t0 = std::chrono::steady_clock::now();
  const gpm::test::child_result r = gpm::test::run_child("train", d.args("t.pool", 0), {});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(CheckpointCrash, RestoredStateIsACompletedCheckpointAndResumingFinishesTheSame) {
  const int trials = gpm::test::crash_trials(24);
  const double full_ms = run_ms();
  int restored_something = 0;
  int killed_mid_run = 0;
  for (int t = 0; t < trials; ++t) {
    gpm::test::scratch_dirs d("cpcrash");
    const gpm::pool_options po = options_for(d.pm_dir(), d.snapshot_dir());
    gpm::pool::create("t.pool", pool_bytes(), kLayout, po).close();
    const std::uint64_t seed = gpm::test::trial_seed(t);
    std::mt19937_64 rng(seed);
    gpm::test::kill_policy policy;
    std::string what = "trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")";
    if (t % 3 != 2) {
      policy = gpm::test::kill_during_run(rng, full_ms);
      what += ", killed at a random time";
    } else {
      const char* point = kCrashPoints[(t / 3) % std::size(kCrashPoints)];
      const bool once = std::string(point) == "checkpoint.add.copies_allocated";
      policy = gpm::test::kill_at(std::string(point) + ":" +
                                  std::to_string(once ? 1 + rng() % 4 : 1 + rng() % 12));
      what += std::string(", crash point ") + point;
    }
    const gpm::test::scenario_args a = d.args("t.pool", seed);
    const gpm::test::child_result r = gpm::test::run_child("train", a, policy);
    killed_mid_run += r.killed && last_reported(r) > 0;
    const std::uint64_t reported = last_reported(r);
    const std::uint64_t interval = 1 + seed % 3;
    if (!r.killed) {
      // The run finished before the kill: it must have completed.
      ASSERT_EQ(r.exit_code, 0) << what << ": " << r.describe();
    }
    {
      gpm::pool p = gpm::pool::open("t.pool", kLayout, po);
      if (gpm::checkpointer::exists(p, "train")) {
        gpm::checkpointer cp = gpm::checkpointer::open(p, "train", checkpoint_options_for(seed));
        gpu_state g(initial_state());
        g.add_to(cp);
        const std::uint64_t last = cp.last_checkpoint();
        if (last == 0) {
          ASSERT_EQ(reported, 0u) << what << ": checkpoint of iteration " << reported
                                  << " was reported durable but none is restorable";
        } else {
          cp.restore();
          const state got = g.to_host();
          // The last reported checkpoint, or the next one if it completed before the kill.
          ASSERT_TRUE(got.step == reported || got.step == reported + interval)
              << what << ": restored iteration " << got.step << ", last reported " << reported;
          expect_state(got, got.step, what);
          ++restored_something;
        }
      } else {
        ASSERT_EQ(reported, 0u) << what;
      }
    }
    // Resume without a kill: the same final state as an uninterrupted run.
    const gpm::test::child_result done = gpm::test::run_child("train", a, {});
    ASSERT_EQ(done.exit_code, 0) << what << ", resumed: " << done.describe();
    gpm::pool p = gpm::pool::open("t.pool", kLayout, po);
    gpm::checkpointer cp = gpm::checkpointer::open(p, "train", checkpoint_options_for(seed));
    gpu_state g(initial_state());
    g.add_to(cp);
    cp.restore();
    const state final_state = g.to_host();
    ASSERT_EQ(final_state.step, kFinalIteration - kFinalIteration % interval) << what;
    expect_state(final_state, final_state.step, what + ", resumed");
  }
  std::printf(
      "%d trials: %d killed after a completed checkpoint, %d restored one (a run: %.0f ms)\n",
      trials, killed_mid_run, restored_something, full_ms);
  EXPECT_GT(restored_something, 0) << "no trial was killed after a checkpoint completed";
  EXPECT_GT(killed_mid_run, 0) << "every kill missed the run (it takes " << full_ms << " ms)";
}

}  // namespace
