// Adaptive mode's choice of how many blocks of one kernel an SM may hold at once
// (tx_options::learn_residency): fewer transactions at once conflict less, and on ATM A1 a kernel
// that happened to need more registers, so that an SM held 2 blocks instead of 3, aborted a
// quarter as often and committed faster, while BVH's did not (docs/workloads/tx.md, "Registers
// decide how many blocks run"). So each kernel is measured: the launch as it fits first, then one
// block an SM fewer while each step committed faster than the one before, down to 1; the fastest
// then stays, its neighbours measured again every kReprobeEvery launches (the load or the data may
// have changed). Host only; one per kernel, launch shape and ring choice.
#pragma once

#include <cstdint>
#include <vector>

namespace gpm::detail::tx {

// Adaptive mode measures a choice it has not taken for this many launches again (the ring or
// not, kind_learner.hpp, first; a residency's neighbours, here): the load or the data may have
// changed.
inline constexpr std::uint64_t kReprobeEvery = 16;

class residency_learner {
 public:
  // The blocks an SM may hold in the next launch, given that `most` fit without a cap (at least
  // 1). Returns `most` for no cap.
  std::uint32_t choose(std::uint32_t most) {
    if (most != most_) {  // first use, or the shape now fits otherwise: learn afresh
      most_ = most;
      rates_.assign(most + 1, -1.0);
      descending_ = true;
      launches_ = 0;
    }
    const std::uint64_t n = launches_++;
    std::uint32_t next = most_;
    if (rates_[most_] < 0) {
      next = most_;
    } else if (descending_) {
      const std::uint32_t lowest = lowest_measured();
      // The step below the lowest measured cap, while each step down was faster.
      if (lowest > 1 && (lowest == most_ || rates_[lowest] > rates_[lowest + 1])) {
        next = lowest - 1;
      } else {
        descending_ = false;
        settled_at_ = n;
        next = best();
      }
    } else {
      next = best();
      if (n - settled_at_ >= kReprobeEvery) {
        // A neighbour of the best, in turn below and above, where there is one.
        settled_at_ = n;
        const bool below = (reprobes_++ % 2 == 0 && next > 1) || next == most_;
        if (below && next > 1) {
          next -= 1;
        } else if (next < most_) {
          next += 1;
        }
      }
    }
    return next;
  }

  // The commit rate a launch at `blocks` blocks an SM reached (from choose(), same `most`).
  void record(std::uint32_t blocks, double rate) {
    if (blocks >= 1 && blocks < rates_.size()) rates_[blocks] = rate;
  }

  // The rate of the fastest measured so far (-1: none measured).
  double best_rate() const { return rates_.empty() ? -1 : rates_[best()]; }

  // The fastest measured so far (most_ before any measurement).
  std::uint32_t best() const {
    std::uint32_t b = most_;
    for (std::uint32_t k = 1; k < rates_.size(); ++k) {
      if (rates_[k] > rates_[b]) b = k;
    }
    return b;
  }

 private:
  std::uint32_t lowest_measured() const {
    std::uint32_t k = most_;
    while (k > 1 && rates_[k - 1] >= 0) --k;
    return k;
  }

  std::uint32_t most_ = 0;
  std::vector<double> rates_;  // by blocks an SM; -1: not measured
  bool descending_ = true;
  std::uint64_t launches_ = 0;
  std::uint64_t settled_at_ = 0;
  std::uint64_t reprobes_ = 0;
};

}  // namespace gpm::detail::tx
