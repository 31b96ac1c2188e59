// Order statistics of a benchmark's repeat times. Percentiles interpolate linearly between the
// two nearest ranks (numpy's default), so the report can recompute them from `times_s`.
#pragma once

#include <vector>

namespace gpmbench {

struct time_summary {
  double median_s = 0;
  double min_s = 0;
  double p25_s = 0;
  double p75_s = 0;
  double max_s = 0;
};

// The q-quantile (0 <= q <= 1) of `values`, which must not be empty.
double quantile(std::vector<double> values, double q);

time_summary summarize(const std::vector<double>& times_s);

}  // namespace gpmbench
