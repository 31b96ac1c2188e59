// One gpmbench result: a (workload, mode) measured on one machine, with every repeat's time, the
// median and spread, the throughput derived from the median, and the platform ceilings measured
// in the same run. Serialised as one line of JSON (schema "gpmkit.bench/1", docs/bench.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "machine.hpp"
#include "stats.hpp"

namespace gpmbench {

inline constexpr const char* kSchema = "gpmkit.bench/1";

// How a throughput follows from the median time of one repeat.
struct throughput_basis {
  std::string unit;       // "GB/s", "Mop/s" (rates) or "ns" (time per operation)
  double per_repeat = 0;  // GB/s: gigabytes a repeat moves; Mop/s: millions of operations;
                          // ns: operations a repeat times
  double value(double median_s) const;
};
throughput_basis gigabytes(std::uint64_t bytes);       // GB/s, 1 GB = 1e9 bytes
throughput_basis mega_operations(std::uint64_t ops);   // Mop/s
throughput_basis nanoseconds_each(std::uint64_t ops);  // ns per operation

using named_counts = std::vector<std::pair<std::string, std::uint64_t>>;
using named_values = std::vector<std::pair<std::string, double>>;

struct bench_record {
  std::string workload;
  std::string mode;
  std::string backend;  // "cuda" or "host"
  machine_info machine;
  named_counts sizes;  // bytes and counts that define the problem
  int repeats = 0;
  int warmup = 0;
  std::vector<double> times_s;  // every timed repeat, in order
  time_summary summary;         // median and spread of times_s
  double throughput_value = 0;  // from the median
  std::string throughput_unit;
  std::uint64_t bytes_persisted = 0;  // per repeat, made durable in the pool or on disk
  named_values ceilings;              // e.g. {"d2h_memcpy_GBps", 55.4}, measured in the same run
  named_values ratio_to_ceiling;      // throughput_value / ceiling, per ceiling
  named_values metrics;   // a workload's further figures (e.g. "restore_s", "load_factor")
  std::string timestamp;  // UTC start of the run (ISO 8601, milliseconds): it names the run
  std::string commit;     // the source it was measured with (source_commit())
};

std::string to_json_line(const bench_record& r);

// The record's "machine" object alone, as one line of JSON (gpmbench machine: for records written
// by tools outside gpmbench, such as scripts/peers).
std::string machine_json_line(const machine_info& m);

// Appends one line to `path` (a JSON Lines file), creating the file and its directory.
void append_record(const std::string& path, const bench_record& r);

// The current UTC time as "2025-01-31T12:34:56.789Z".
std::string utc_timestamp();

// The commit of the source gpmbench was built from: $GPMKIT_COMMIT when set (a lent GPU machine
// gets the tree without its git history: scripts/device/prepare.sh records it), else the commit
// the build found (12 hex digits, "-dirty" with uncommitted changes), else "unknown".
std::string source_commit();

}  // namespace gpmbench
