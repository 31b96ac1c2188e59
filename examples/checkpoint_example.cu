// Checkpointing a training loop with gpm::checkpointer (docs/checkpointing.md). Run it, kill it
// (Ctrl-C) halfway, run it again: it resumes from the last checkpoint and ends with the same
// weights as a run that was never interrupted. `checkpoint_example --fresh` starts over.
//
// The "training" is a toy (each step nudges every weight towards a target), but the pattern is
// the real one: register the state by name, restore if a checkpoint exists, checkpoint every N
// steps, hint chunks that are final early (pre-copy), leave read-only inputs to redundant-chunk
// elimination.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/platform/kernel.cuh>

namespace {

constexpr unsigned kWeights = 1 << 16;
constexpr unsigned kSteps = 200;
constexpr unsigned kEvery = 10;  // checkpoint interval

__global__ void make_targets(float* target, unsigned n) {
  for (std::uint64_t i : gpm::grid_stride(n))
    target[i] = static_cast<float>(i % 97) / 97.0f;
}

__global__ void train_step(float* w, const float* target, unsigned n, unsigned* step) {
  for (std::uint64_t i : gpm::grid_stride(n))
    w[i] += 0.05f * (target[i] - w[i]);
  if (blockIdx.x == 0 && threadIdx.x == 0) *step += 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const bool fresh = argc > 1 && std::strcmp(argv[1], "--fresh") == 0;
  if (fresh && std::filesystem::exists(gpm::pool::resolve("checkpoint_example.pool"))) {
    gpm::pool::remove("checkpoint_example.pool", {}, /*with_snapshot=*/true);
  }

  // The pool holds two copies of every chunk; open it after a restart, create it the first time.
  gpm::pool pool = [] {
    try {
      return gpm::pool::open("checkpoint_example.pool", "checkpoint-example");
    } catch (const gpm::error& e) {
      if (e.code() != gpm::errc::not_found) throw;
      return gpm::pool::create("checkpoint_example.pool", 8 << 20, "checkpoint-example");
    }
  }();
  gpm::checkpoint_options options;
  options.snapshot_every = 5;  // every 5th checkpoint also goes to disk (power-loss durable)
  gpm::checkpointer cp = gpm::checkpointer::open_or_create(pool, "training", options);

  gpm::device_buffer<float> weights(kWeights), targets(kWeights);
  gpm::device_buffer<unsigned> step(1);
  weights.fill_bytes(0);
  step.fill_bytes(0);
  gpm::launch(make_targets, 64, 256, 0, nullptr, targets.data(), kWeights);

  // Chunks are found by name after a restart, in any order.
  cp.add("weights", weights.data(), kWeights);
  cp.add("step", step.data(), 1);
  cp.add("targets", targets.data(), kWeights);  // read-only: skipped once seen unchanged

  if (cp.last_checkpoint() > 0) {
    const gpm::restore_result r = cp.restore();
    std::printf("restored checkpoint %llu (%llu bytes in %.3f ms)\n",
                static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.bytes),
                r.seconds * 1e3);
  }
  unsigned done = 0;
  step.copy_to_host(&done, 1);

  gpm::stream s;
  for (unsigned k = done; k < kSteps; ++k) {
    gpm::launch(train_step, 64, 256, 0, s, weights.data(), targets.data(), kWeights, step.data());
    if ((k + 1) % kEvery == 0) {
      const gpm::checkpoint_result r = cp.checkpoint(0, s);
      std::printf(
          "step %u: checkpoint %llu, %u chunks copied, %u skipped as unchanged, %.3f ms%s\n", k + 1,
          static_cast<unsigned long long>(r.seq), r.copied, r.redundant, r.seconds * 1e3,
          r.snapshotted ? ", snapshot on disk" : "");
    }
  }
  s.synchronize();
  std::vector<float> w(kWeights);
  weights.copy_to_host(w.data(), kWeights);
  double sum = 0;
  for (float x : w) sum += x;
  std::printf("done: %u steps, sum of weights %.6f\n", kSteps, sum);
  return 0;
} catch (const gpm::error& e) {
  std::fprintf(stderr, "checkpoint_example: %s\n", e.what());
  return 1;
}
