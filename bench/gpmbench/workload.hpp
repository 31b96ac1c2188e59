// What a gpmbench workload is: named modes measured side by side in one run. A mode may name
// another mode of its workload as its ceiling; the runner then measures the ceiling first, in
// the same run, and records the ratio. Workloads are registered in workload.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpm/platform/runtime.hpp>

#include "record.hpp"

namespace gpmbench {

// A wrong command line: the message says what to type instead.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct run_options {
  std::optional<std::uint64_t> bytes;  // --bytes: overrides a workload's main size
  int repeats = 5;
  int warmup = 1;
  bool quick = false;                 // tiny sizes, for smoke tests
  std::vector<std::string> modes;     // empty: every mode
  std::vector<std::string> cases;     // empty: every case of the workload
  // --interleave: `repeats` rounds, each running every chosen mode once in an order rotated by
  // the round (the warm-ups in the first round), instead of each mode's repeats back to back;
  // the records are the same.
  bool interleave = false;
  std::string out_dir;                // where <workload>.jsonl goes
  std::string disk_dir = "/var/tmp";  // parent of the run's files on disk (fsync, snapshots)
  std::string pm_dir;  // parent of the run's pools; empty: $GPMKIT_PM_DIR, else /dev/shm
  unsigned threads_per_block = 256;  // geometry of the kernels that fill the GPU
  unsigned blocks_per_sm = 0;        // 0: as many as fit (max threads per SM / block size)
  // A suite's resumption (gpmbench suite --resume, --budget): (case, mode) pairs done already
  // (recorded, or skipped as unable to run) are not run again unless they are another mode's
  // ceiling; on_done hears of each pair as it is done; no mode starts after the deadline.
  std::function<bool(const std::string& case_name, const std::string& mode)> done_already;
  std::function<void(const std::string& case_name, const std::string& mode)> on_done;
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// What one mode gives the runner; the runner adds the statistics, ceilings and machine.
struct measurement {
  named_counts sizes;
  std::vector<double> times_s;
  throughput_basis throughput;
  std::uint64_t bytes_persisted = 0;
  named_values metrics;  // further figures of this mode, recorded as they are
  // The metric compared with the mode's ceiling when the ceiling is measured in another unit
  // than the throughput (e.g. "persist_GBps" of a mode measured in Mop/s, against a GB/s
  // ceiling); empty: the throughput is compared, and the units must match.
  std::string compared_metric;
  // Non-empty: the mode cannot run in this case (the reason, printed); no record is written.
  std::string skipped = {};
  // The figures of an earlier call (a mode measured once per invocation, such as the ooc
  // workloads' disk-sequential): interleaved rounds do not count its times again.
  bool cached = false;
};

struct mode_context {
  const run_options& options;
  const gpm::device_info& device;
  std::string pm_dir;    // this run's directory for pools (tmpfs), removed after the run
  std::string disk_dir;  // this run's directory on disk, removed after the run
  std::string case_name =
      {};  // the workload's case being measured ("" for workloads without cases)

  // Calls `once` options.warmup times, then options.repeats times, and returns the seconds that
  // the repeats report. `once(call)` gets the call's number (0, 1, ... counting warm-ups), times
  // only the operation measured, and does any per-call preparation outside its timed part.
  std::vector<double> repeat(const std::function<double(int call)>& once) const;
};

struct mode {
  std::string name;
  std::string summary;
  std::string ceiling;  // the mode of this workload this one is compared against ("": none)
  std::function<measurement(const mode_context&)> run;
};

struct workload {
  std::string name;
  std::string summary;
  std::vector<mode> modes;  // in running order: a ceiling before the modes compared to it
  // Cases (e.g. problem regimes) in which every chosen mode runs once, in order, each mode then
  // recording its case in its sizes; empty: the modes run once.
  std::vector<std::string> cases = {};
};

const std::vector<workload>& workloads();
const workload& find_workload(const std::string& name);  // throws usage_error

// Runs the chosen modes of `w` and the ceilings they need in each of its cases, appending one
// record per mode to <options.out_dir>/<w.name>.jsonl as soon as it is measured (interleaved:
// after its last round) and a line per mode to stdout. Returns false when options.deadline
// stopped it before every mode that was not recorded already had run; an interleaved run then
// records the rounds it finished.
bool run_workload(const workload& w, const run_options& options, const gpm::device_info& dev);

workload platform_workload();
workload random_span_workload();
workload persist_scaling_workload();
workload cp_dnn_workload(), cp_cfd_workload(), cp_blackscholes_workload();  // workloads/checkpoint
workload cp_hotspot_workload(), cp_hetero_workload();                       // workloads/checkpoint
workload ycsb_workload(), ycsb_key32_workload(), ycsb_kv32_workload();      // workloads/ycsb
workload ycsb_uniform_workload();                                           // workloads/ycsb
workload hash_micro_workload(), hash_batch_sweep_workload(), hash_batch_sweep_key32_workload(),
    hash_batch_sweep_kv32_workload(), hash_factors_workload();    // workloads/ycsb
workload hash_cache_workload(), hash_load_factor_workload();      // workloads/ycsb
workload hash_resize_recovery_workload();                         // workloads/ycsb
workload kvs_set_workload(), kvs_mixed_workload();                // workloads/kvs
workload db_insert_workload(), db_update_workload();              // workloads/db
workload tx_atm_a1_workload(), tx_atm_a2_workload();              // workloads/tx
workload tx_hash_h1_workload(), tx_hash_h2_workload();            // workloads/tx
workload tx_hash_lookup_workload();                               // workloads/tx
workload tx_bvh_1_workload(), tx_bvh_2_workload();                // workloads/tx
workload tx_micro_pressure_workload(), tx_ring_sweep_workload(),  // workloads/tx
    tx_residency_sweep_workload();
namespace native {
workload bfs_workload(), srad_workload(), prefix_sum_workload();
}  // namespace native
namespace ooc {  // workloads/ooc: DRAGON's applications on gpm::ooc, and the ablations
workload vectoradd_workload(), blackscholes_workload(), binomial_workload(), backprop_workload();
workload pathfinder_workload(), hotspot_workload(), lavamd_workload(), srad_workload();
workload ablation_readahead_workload(), ablation_line_workload(), ablation_cache_workload();
workload ablation_output_workload(), ablation_io_threads_workload(),
    ablation_readahead_run_workload(), ablation_io_poll_workload(), ablation_sync_workload();
workload ablation_fill_workload(), ablation_write_behind_workload();
}  // namespace ooc

// `gpmbench crash-demo` (workloads/native/crash_demo.cpp): a BFS run killed with SIGKILL halfway,
// then resumed and checked; returns the exit status (0: the resumed result is correct). The
// child it starts runs crash_demo_child (`gpmbench crash-demo --child DIR LEVEL`).
int crash_demo(const gpm::device_info& dev);
int crash_demo_child(const std::string& dir, bool emulated, std::uint64_t kill_at);

}  // namespace gpmbench
