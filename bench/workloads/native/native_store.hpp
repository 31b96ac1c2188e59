// What the native-persistence workloads (BFS, SRAD, prefix sum; GPM paper §4.3) share: the
// persistent state of one run in a pool (a validated header, named arrays and a progress word
// that recovery trusts), and the sink, which says how a mode makes a step's results durable
// (GPM from the kernel, GPM-NDP, CAP-mm, CAP-fs, or the CPU implementation). The workloads'
// kernels and steps live in their own files; this file never computes anything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gpm/platform/runtime.hpp>
#include <gpm/pool/pool.hpp>

#include "gpmbench/baselines.hpp"
#include "gpmbench/resources.hpp"

namespace gpmbench::native {

// The pool layout name of every native-persistence run.
inline constexpr char kLayout[] = "gpmbench-native";

// How a run makes its results durable: the gpmbench modes of these workloads.
enum class way {
  gpm,      // the kernel stores into the pool and persists; the grid's last block publishes
  gpm_ndp,  // the kernel stores into the pool; CPU threads write the arrays back after it
  cap_mm,   // the kernel computes in GPU memory; cap_mm copies the arrays into the pool
  cap_fs,   // the kernel computes in GPU memory; cap_fs writes the arrays into a file + fsync
  cpu,      // CPU threads compute into the pool and write back what they stored
};
std::string mode_name(way w);

// The progress word: s means the first s steps are durable (0: nothing yet); kFinished is set
// once the run ended. It is the one value recovery trusts: every step's data is
// durable before the word that covers it is published.
inline constexpr std::uint64_t kFinished = 1ull << 63;

// One named array of a run.
struct array_spec {
  std::string name;
  std::uint64_t bytes;
};

// A run's state in a pool: "<workload>.header" (the common object header, then workload,
// parameters and array sizes), "<workload>.progress" (the progress word) and "<workload>.<array>"
// objects. The parameters identify the problem (sizes, seeds, the input's checksum), so that
// resuming with another problem is refused instead of mixing two runs.
class run_store {
 public:
  // Allocates a fresh run in `p` (zero-filled arrays, progress 0).
  static run_store create(gpm::pool& p, std::string_view workload,
                          const std::vector<std::uint64_t>& params,
                          const std::vector<array_spec>& arrays);
  // Finds and validates a run created with the same workload, parameters and arrays; throws
  // gpm::error (corrupt, version, invalid_argument, not_found) saying what differs.
  static run_store open(gpm::pool& p, std::string_view workload,
                        const std::vector<std::uint64_t>& params,
                        const std::vector<array_spec>& arrays);
  // Bytes a pool needs for such a run (the arrays, the header and the pool's own metadata).
  static std::uint64_t pool_bytes(const std::vector<array_spec>& arrays);

  template <class T>
  T* host(int array) const {
    return pool_->host_ptr<T>(offsets_.at(array));
  }
  template <class T>
  T* device(int array) const {
    return pool_->ref().ptr<T>(offsets_.at(array));
  }
  std::uint64_t bytes(int array) const { return arrays_.at(array).bytes; }
  std::uint64_t file_offset(int array) const;  // where cap-fs keeps it in its file
  std::uint64_t file_bytes() const;            // cap-fs file: every array, then the progress word
  int arrays() const { return static_cast<int>(arrays_.size()); }

  std::uint64_t* progress_host() const { return pool_->host_ptr<std::uint64_t>(progress_); }
  std::uint64_t* progress_device() const { return pool_->ref().ptr<std::uint64_t>(progress_); }
  std::uint64_t progress() const;  // the progress word as recovery reads it
  // Host publication: stores the word and writes it back (after the data it covers is durable).
  void publish(std::uint64_t word) const;
  // Zeroes every array and the progress word and makes that durable: a fresh run in the same
  // objects, for benchmark repeats.
  void reset() const;
  gpm::pool& pool() const { return *pool_; }

 private:
  run_store(gpm::pool& p, std::vector<array_spec> arrays) : pool_(&p), arrays_(std::move(arrays)) {}
  gpm::pool* pool_;
  std::vector<array_spec> arrays_;
  std::vector<std::uint64_t> offsets_;
  std::uint64_t progress_ = 0;
};

// A byte range of one array, as a step names what it made durable.
struct array_range {
  int array;
  const void* device_src;  // the GPU-memory copy (cap modes read it); null: the pool itself
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// How a mode makes a step durable. The workload runs a step's kernels (storing into the pool
// when kernel_writes_pool(), persisting there when kernel_persists()), then calls commit()
// with the arrays the step changed and the progress word that covers them.
class sink {
 public:
  // `file` names cap-fs's file; `staging_bytes` sizes the cap modes' pinned buffers.
  sink(way w, const run_store& store, const std::string& file = "",
       std::uint64_t staging_bytes = 64 * kMiB);
  ~sink();
  sink(const sink&) = delete;
  sink& operator=(const sink&) = delete;

  way kind() const { return way_; }
  bool kernel_writes_pool() const { return way_ == way::gpm || way_ == way::gpm_ndp; }
  bool kernel_persists() const { return way_ == way::gpm; }
  cpu_team& team();  // the CPU threads of gpm-ndp, cap-mm and cpu

  // Waits for the step's work on `s`, makes `ranges` durable the mode's way, then publishes
  // `word` (gpm: the kernel published it already; commit then only waits and counts).
  void commit(cudaStream_t s, const std::vector<array_range>& ranges, std::uint64_t word);
  // Bytes the kernel persisted itself (gpm, cpu), counted by the workload.
  void count_persisted(std::uint64_t bytes) { bytes_persisted_ += bytes; }
  std::uint64_t bytes_persisted() const;
  // After the last step: publishes `word` (with kFinished) the mode's way, whatever the mode.
  void finish(cudaStream_t s, std::uint64_t word);
  // Copies the durable bytes of array `array` (the pool's, or cap-fs's file's) into `dst`: what
  // a mode's check compares with the expected result.
  void read_durable(int array, void* dst) const;

 private:
  void write_file_word(std::uint64_t word);  // cap-fs: the progress word, after the data

  way way_;
  const run_store& store_;
  std::unique_ptr<cpu_team> team_;
  std::unique_ptr<ndp_persister> ndp_;
  std::unique_ptr<cap_mm> mm_;
  std::unique_ptr<cap_fs> fs_;
  std::uint64_t bytes_persisted_ = 0;
};

// What a run did, for resumption reports, crash tests and metrics.
struct run_summary {
  std::uint64_t steps_total = 0;      // steps of the whole run (iterations, or blocks)
  std::uint64_t steps_at_start = 0;   // durable when this call started (resumed from there)
  std::uint64_t steps_run = 0;        // computed by this call
  std::uint64_t output_checksum = 0;  // of the final output in the pool
  double seconds = 0;
  std::uint64_t bytes_persisted = 0;  // by this call
};

// Called after durable steps with the number of steps durable and a line for the user ("bfs: level
// 12 durable"); crash tests forward it as a progress line.
using progress_fn = std::function<void(std::uint64_t steps_durable, const std::string& line)>;

// What the library entry points (run_bfs, ...) share: opens the pool at `path` for a resumed
// run, or creates it (failing if it exists) for a new one; finds (validating) or creates the
// run; calls `solve` with a sink for `how` and times it. `how` must keep the whole run in the pool
// (gpm, gpm-ndp, cap-mm, cpu): cap-fs keeps it in a file and is a benchmark mode only.
run_summary run_in_pool(const std::string& path, const gpm::pool_options& options,
                        std::string_view workload, const std::vector<std::uint64_t>& params,
                        const std::vector<array_spec>& arrays, way how, bool resume,
                        const std::function<run_summary(const run_store&, sink&)>& solve);

// `requested`, or with 0 blocks, the geometry of kernels that fill the GPU (outside a gpmbench
// run, which has filling_geometry).
geometry kernel_geometry(geometry requested);

}  // namespace gpmbench::native
