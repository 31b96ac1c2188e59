// Adaptive mode's choice, per kernel, between its launch with the ring and helper warps and its
// launch without them (tx_options::learn): helper warps pay when they shorten commits, which the
// bandwidth of the paper's Fig. 6 sweep does not predict for every kernel (on an H100 they won at
// 4.5 GB/s on BVH and ATM A1 while the sweep's crossover was 5-8 GB/s, and BVH's reduce committed
// 1.16x faster without them while its ring launch persisted above the threshold). So each kernel
// is measured both ways, its first launch with the ring, its second without, and later launches
// take whichever committed faster. The kind that lost is measured again once it has not run for
// kReprobeEvery launches (its rate may be stale: the load or the data changed), and each time it
// loses again that wait doubles, up to kReprobeMost, so that a kind three times slower (direct
// commits on Hashtable H2) costs a long run about 2/1024 of its time, not 2/16; when the winner
// changes the wait starts again at kReprobeEvery. Host only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "residency.hpp"

namespace gpm::detail::tx {

inline constexpr std::uint64_t kReprobeMost = 1024;

class kind_learner {
 public:
  // Whether the next launch gets the ring.
  bool choose() {
    const std::uint64_t n = launches_++;
    bool ring = ring_ < 0;  // the ring first, then direct commits, then the faster
    if (!ring && direct_ >= 0) {
      const bool ring_wins = ring_ >= direct_;
      if (ring_wins != ring_won_) {
        ring_won_ = ring_wins;
        wait_ = kReprobeEvery;
      }
      const bool reprobe = n - (ring_wins ? direct_at_ : ring_at_) >= wait_;
      if (reprobe) wait_ = std::min(2 * wait_, kReprobeMost);
      ring = reprobe ? !ring_wins : ring_wins;
    }
    (ring ? ring_at_ : direct_at_) = n;
    return ring;
  }

  // The commit rate a launch of that kind reached.
  void record(bool ring, double rate) { (ring ? ring_ : direct_) = rate; }

  // The last rate recorded of that kind (-1: none yet).
  double rate(bool ring) const { return ring ? ring_ : direct_; }

 private:
  double ring_ = -1, direct_ = -1;
  std::uint64_t launches_ = 0;
  std::uint64_t ring_at_ = 0, direct_at_ = 0;  // the last launch (0, 1, ...) of each kind
  std::uint64_t wait_ = kReprobeEvery;
  bool ring_won_ = true;
};

}  // namespace gpm::detail::tx
