// What the gpKVS and gpDB runners share: how a mode of a batch workload is built from a strategy
// (the way it makes batches durable), and the paper's Table 5 figures for the modes that recover
// in place. Measures nothing itself.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpmbench/workload.hpp"

namespace gpmbench {

// A mode that builds Strategy(ctx, sized(ctx), args...) and returns run(ctx, config, name,
// strategy); every mode but `gpm` is compared with `gpm` in the same run.
template <class Strategy, class Sized, class Run, class... Args>
mode batch_mode(Sized sized, Run run, std::string name, std::string summary, Args... args) {
  return {name, std::move(summary), name == "gpm" ? "" : "gpm",
          [sized, run, name, args...](const mode_context& ctx) {
            const auto c = sized(ctx);
            Strategy s(ctx, c, args...);
            return run(ctx, c, name, s);
          }};
}

// restore_s (seconds to recover a batch interrupted just before its commit) and
// restore_pct_of_op (that, as a percentage of the median time of one batch of m).
inline void add_restore_metrics(measurement& m, double restore_s, std::uint64_t batches) {
  std::vector<double> sorted = m.times_s;
  std::sort(sorted.begin(), sorted.end());
  const double batch_s = sorted[sorted.size() / 2] / static_cast<double>(batches);
  m.metrics.push_back({"restore_s", restore_s});
  m.metrics.push_back({"restore_pct_of_op", 100 * restore_s / batch_s});
}

}  // namespace gpmbench
