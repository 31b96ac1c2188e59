// Order statistics of repeat times (see stats.hpp).
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gpmbench {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) throw std::invalid_argument("quantile of no values");
  if (q < 0 || q > 1) throw std::invalid_argument("quantile outside [0, 1]");
  std::sort(values.begin(), values.end());
  const double rank = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * frac;
}

time_summary summarize(const std::vector<double>& times_s) {
  time_summary s;
  s.median_s = quantile(times_s, 0.5);
  s.min_s = quantile(times_s, 0.0);
  s.p25_s = quantile(times_s, 0.25);
  s.p75_s = quantile(times_s, 0.75);
  s.max_s = quantile(times_s, 1.0);
  return s;
}

}  // namespace gpmbench
