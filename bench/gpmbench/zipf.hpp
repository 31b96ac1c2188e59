// Skewed key choice for the key-value workloads (gpKVS, YCSB): a Zipf distribution over
// [0, items) as YCSB draws it (Gray et al., "Quickly generating billion-record synthetic
// databases", SIGMOD'94), scrambled so that popular keys are spread over the key space instead of
// being the smallest ones. Draws are counter-based, key(seed, i) depends only on its arguments,
// so host threads and GPU threads can generate the same stream in parallel and in any order.
// theta = 0 gives the uniform distribution.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/macros.hpp>

namespace gpmbench {

class zipf_distribution {
 public:
  zipf_distribution(std::uint64_t items, double theta) : items_(items), theta_(theta) {
    if (items == 0) throw std::invalid_argument("zipf_distribution: no items to draw from");
    if (!(theta >= 0 && theta < 1)) {
      throw std::invalid_argument("zipf_distribution: theta must be in [0, 1), as in YCSB");
    }
    if (theta == 0) return;
    zeta_n_ = zeta(items, theta);
    const double zeta2 = zeta(2, theta);
    alpha_ = 1 / (1 - theta);
    eta_ = (1 - std::pow(2.0 / static_cast<double>(items), 1 - theta)) / (1 - zeta2 / zeta_n_);
    half_pow_theta_ = 1 + std::pow(0.5, theta);
  }

  std::uint64_t items() const { return items_; }
  double theta() const { return theta_; }

  // The popularity rank (0 = most popular) for a uniform u in [0, 1).
  GPM_HOST_DEVICE std::uint64_t rank(double u) const {
    if (theta_ == 0) return clamp(static_cast<std::uint64_t>(u * static_cast<double>(items_)));
    const double uz = u * zeta_n_;
    if (uz < 1) return 0;
    if (uz < half_pow_theta_) return clamp(1);
    return clamp(static_cast<std::uint64_t>(static_cast<double>(items_) *
                                            pow(eta_ * u - eta_ + 1, alpha_)));
  }

  // The i-th draw of stream `seed`: a key index in [0, items).
  GPM_HOST_DEVICE std::uint64_t key(std::uint64_t seed, std::uint64_t i) const {
    const std::uint64_t bits = gpm::mix64(gpm::mix64(seed) ^ i);
    const double u = static_cast<double>(bits >> 11) * 0x1.0p-53;
    const std::uint64_t r = rank(u);
    // Scramble: a bijection would keep ranks distinct, but YCSB's hash-and-wrap is what its
    // figures use, and collisions only merge a few unpopular ranks.
    return theta_ == 0 ? r : gpm::mix64(r + 1) % items_;
  }

  // sum_{i=1..n} i^-theta: exact for the first terms, Euler-Maclaurin for the tail (relative
  // error far below what the draws can show).
  static double zeta(std::uint64_t n, double theta) {
    constexpr std::uint64_t kExact = 1u << 20;
    double sum = 0;
    const std::uint64_t m = n < kExact ? n : kExact;
    for (std::uint64_t i = 1; i <= m; ++i) sum += std::pow(static_cast<double>(i), -theta);
    if (n == m) return sum;
    const auto f = [theta](double x) { return std::pow(x, -theta); };
    const double a = static_cast<double>(m), b = static_cast<double>(n);
    const double integral = (std::pow(b, 1 - theta) - std::pow(a, 1 - theta)) / (1 - theta);
    const double fprime_b = -theta * std::pow(b, -theta - 1), fprime_a = -theta * std::pow(a, -theta - 1);
    return sum + integral + (f(b) - f(a)) / 2 + (fprime_b - fprime_a) / 12;
  }

 private:
  GPM_HOST_DEVICE std::uint64_t clamp(std::uint64_t r) const { return r < items_ ? r : items_ - 1; }

  std::uint64_t items_;
  double theta_;
  double zeta_n_ = 0;
  double alpha_ = 0;
  double eta_ = 0;
  double half_pow_theta_ = 0;
};

}  // namespace gpmbench
