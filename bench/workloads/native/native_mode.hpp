// The gpmbench side of the native-persistence workloads: every workload measures the same modes
// the same way (a pool per mode, a run reset before each repeat, the whole run timed, the durable
// result checked afterwards), so that skeleton lives here once. A workload supplies a problem.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpmbench/workload.hpp"
#include "native_store.hpp"

namespace gpmbench::native {

// One workload's problem, made for a mode.
struct native_problem {
  std::string workload;               // the run's name in its pool ("bfs", ...)
  std::vector<std::uint64_t> params;  // identify the problem in the run's header
  std::vector<array_spec> arrays;
  named_counts sizes;  // recorded with the measurement
  // One whole run from a reset store, the way the sink says.
  std::function<run_summary(const run_store&, sink&)> solve;
  // Compares the durable result with the expected one; calls check_failed on a mismatch.
  std::function<void(const sink&, const std::string& mode)> check;
};

using problem_factory = std::function<native_problem(const mode_context&, way)>;

// The modes of a native workload: the d2h_memcpy ceiling (for `ceiling_bytes`), then gpm,
// gpm-ndp, cap-mm, cap-fs and cpu. Each records bytes persisted per run and, as throughput,
// those bytes over the run's time (the GPM paper's Figure 12), against the ceiling.
std::vector<mode> native_modes(const problem_factory& make,
                               std::function<std::uint64_t(const mode_context&)> ceiling_bytes);

}  // namespace gpmbench::native
