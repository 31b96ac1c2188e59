// The checkpoint workloads of gpmbench (GPM ASPLOS'22 §5.3 and HeteroCheckpoint DSN'14): an
// iterative GPU application computes for real and its state is checkpointed every N iterations
// by each persistence path side by side. An application says which of its GPU buffers are its
// state and how each one changes during an iteration; driver.cu turns it into a workload whose
// modes are the paths (docs/checkpointing.md, "Benchmarks"). Nothing here persists anything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gpm/platform/runtime.hpp>

#include "workload.hpp"

namespace gpmbench {

// How a chunk of application state changes within an iteration: what lets HeteroCheckpoint's
// pre-copy and redundant-chunk elimination help.
enum class chunk_change {
  every_iteration,  // rewritten by the iteration's last kernels
  early,            // final after the iteration's first phase: pre-copied from there
  sometimes,        // rewritten every few iterations only
  never,            // read-only input: redundant after the first checkpoint
};

struct app_chunk {
  std::string name;
  void* device = nullptr;
  std::uint64_t bytes = 0;
  chunk_change change = chunk_change::every_iteration;
};

class iterative_app {
 public:
  virtual ~iterative_app() = default;
  // The application state, in registration order. Buffers stay where they are for the app's life.
  virtual std::vector<app_chunk> chunks() = 0;
  // Enqueues iteration `it` on `s`, calling `early_done()` once the chunks marked `early` have
  // their final values for this iteration (pre-copy hints go there).
  virtual void iterate(std::uint64_t it, cudaStream_t s,
                       const std::function<void()>& early_done) = 0;
  // The problem's sizes, and figures showing the computation is real (loss, residual ...),
  // read after the timed runs.
  virtual named_counts sizes() const = 0;
  virtual named_values figures() { return {}; }
};

// Which size to build: paper-scale on a GPU, small on the emulator, tiny with --quick.
enum class app_scale { gpu, emulator, quick };
app_scale scale_of(const mode_context& ctx);

struct checkpoint_app {
  std::string workload;  // "cp_dnn", ...
  std::string summary;
  std::function<std::unique_ptr<iterative_app>(const mode_context&)> make;
};

// The workload that runs `app` under every checkpoint path (driver.cu).
workload checkpoint_workload(const checkpoint_app& app);

// The applications (one file each).
std::unique_ptr<iterative_app> make_dnn_app(const mode_context& ctx);
std::unique_ptr<iterative_app> make_cfd_app(const mode_context& ctx);
std::unique_ptr<iterative_app> make_blackscholes_app(const mode_context& ctx);
std::unique_ptr<iterative_app> make_hotspot_app(const mode_context& ctx);
std::unique_ptr<iterative_app> make_hetero_app(const mode_context& ctx);

}  // namespace gpmbench
