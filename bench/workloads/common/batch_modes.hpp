// What the gpKVS and gpDB runners share: their modes (the same eight ways of making a batch
// failure-atomic, in the same order, each built from a strategy of the workload), the checks
// every mode's result must pass, the paper's Table 5 figures for the modes that recover in place,
// and pool sizing. Measures nothing itself: each workload's run() times its batches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>
#include <gpm/log/undo_tx.cuh>

#include "gpmbench/resources.hpp"
#include "gpmbench/workload.hpp"

namespace gpmbench {

// Pools are made of pages: sizes of pools the workloads compute are rounded up to them.
inline std::uint64_t page_multiple(std::uint64_t bytes) {
  return (bytes + bench_pool::kPageBytes - 1) / bench_pool::kPageBytes * bench_pool::kPageBytes;
}

// A pool big enough for `object_bytes` of objects plus each object's page alignment.
inline std::uint64_t batch_pool_bytes(std::uint64_t object_bytes) {
  return pool_bytes_for(page_multiple(object_bytes + 8 * bench_pool::kPageBytes));
}

// How many times a mode's timed call ran (warm-ups and repeats): totals over the mode's life
// divided by it are per-repeat figures.
inline std::uint64_t calls_of(const mode_context& ctx) {
  return static_cast<std::uint64_t>(ctx.options.warmup + ctx.options.repeats);
}

// Fails the mode when some undo entries did not fit in their log.
inline void check_no_log_failures(const std::string& what, std::uint64_t failures) {
  if (failures != 0) {
    check_failed(what + ": " + std::to_string(failures) + " undo entries did not fit");
  }
}

// Fails the mode when `diff` (the durable table against the host's replay: "" when equal) is
// not empty; `when` says at which point the table was compared.
inline void check_replay(const std::string& what, const std::string& when,
                         const std::string& diff) {
  if (!diff.empty()) check_failed(what + ": " + when + ", the durable table differs: " + diff);
}

// restore_s (seconds to recover a batch interrupted just before its commit), restore_pct_of_op
// (that, as a percentage of the median time of one batch of m) and restore_first_s (the first
// recovery in the process, timed the same way).
inline void add_restore_metrics(measurement& m, double restore_s, double first_s,
                                std::uint64_t batches) {
  std::vector<double> sorted = m.times_s;
  std::sort(sorted.begin(), sorted.end());
  const double batch_s = sorted[sorted.size() / 2] / static_cast<double>(batches);
  m.metrics.push_back({"restore_s", restore_s});
  m.metrics.push_back({"restore_pct_of_op", 100 * restore_s / batch_s});
  m.metrics.push_back({"restore_first_s", first_s});
}

// For the strategies that recover in place (those with restore_seconds(args...): run one more
// batch up to just before its commit, then time its recovery): measures that twice, checking
// each time that the table is then the replay without the batch (`diff()`, as check_replay's),
// and adds the Table 5 metrics. The second recovery is the one reported: the first launches of
// the recovery kernels in a process load their code (CUDA loads modules lazily, by default), which
// cost an H200 about a second, 25 times the recovery of an interrupted gpKVS batch. Other
// strategies: nothing.
template <class Strategy, class Diff, class... Args>
void measure_restore(measurement& m, Strategy& s, std::uint64_t batches, const std::string& what,
                     Diff diff, const Args&... args) {
  if constexpr (requires { s.restore_seconds(args...); }) {
    const double first_s = s.restore_seconds(args...);
    check_replay(what, "after recovering an interrupted batch", diff());
    const double restore_s = s.restore_seconds(args...);
    check_replay(what, "after recovering the same batch interrupted again", diff());
    add_restore_metrics(m, restore_s, first_s, batches);
    // Where the reported recovery's time went (gpm::undo_recovery).
    const gpm::undo_recovery& r = s.last_recovery();
    m.metrics.push_back({"restore_allocate_s", r.allocate_seconds});
    m.metrics.push_back({"restore_kernel_s", r.kernel_seconds});
  }
}

// The summaries of a batch workload's modes that say what the workload does in them (the other
// modes' summaries are the same for every such workload).
struct batch_mode_summaries {
  std::string gpm, gpm_conv, gpm_ndp, cap_mm, cap_fs, cpu;
};

// The modes of a failure-atomic batch workload W, in running order. W gives
//   static config sized(const mode_context&, bool variant)      the sizes of a run
//   template <class S> static measurement run(ctx, config, mode name, S&)   one mode's run
// and its strategies, each constructed as S(ctx, config, args...):
//   template <class Log> logged  (mode name, snapshot after each batch): undo transactions on Log
//   ndp, cap_mm, cap_fs (on disk), cpu
// Every mode but `gpm` is compared with `gpm` in the same run. `with_conv`: whether gpm-conv runs.
template <class W>
class batch_modes {
 public:
  static std::vector<mode> all(bool variant, bool with_conv, const batch_mode_summaries& say) {
    std::vector<mode> m;
    const std::string gpm = "gpm", conv = "gpm-conv", snapshot = "snapshot";
    m.push_back(make<typename W::template logged<gpm::hcl_log>>(variant, gpm, say.gpm, gpm, false));
    if (with_conv) {
      m.push_back(make<typename W::template logged<gpm::conv_log>>(variant, conv, say.gpm_conv,
                                                                   conv, false));
    }
    m.push_back(make<typename W::ndp>(variant, "gpm-ndp", say.gpm_ndp));
    m.push_back(make<typename W::cap_mm>(variant, "cap-mm", say.cap_mm));
    m.push_back(make<typename W::cap_fs>(variant, "cap-fs", say.cap_fs, false));
    m.push_back(make<typename W::cap_fs>(
        variant, "cap-fs-disk", "as cap-fs, the files on disk (power-loss durable)", true));
    m.push_back(make<typename W::template logged<gpm::hcl_log>>(
        variant, snapshot, "gpm, then a pool snapshot to disk after each batch", snapshot, true));
    m.push_back(make<typename W::cpu>(variant, "cpu", say.cpu));
    return m;
  }

 private:
  template <class Strategy, class... Args>
  static mode make(bool variant, const std::string& name, std::string summary, Args... args) {
    return {name, std::move(summary), name == "gpm" ? "" : "gpm",
            [variant, name, args...](const mode_context& ctx) {
              const auto c = W::sized(ctx, variant);
              Strategy s(ctx, c, args...);
              return W::run(ctx, c, name, s);
            }};
  }
};

}  // namespace gpmbench
