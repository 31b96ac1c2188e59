// The adaptive mode's choice of a kernel's kind, with the ring or without
// (src/tx/kind_learner.hpp), driven with made-up commit rates: which launches measure which kind.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kind_learner.hpp"

namespace {

using gpm::detail::tx::kind_learner;
using gpm::detail::tx::kReprobeEvery;
using gpm::detail::tx::kReprobeMost;

// The launches (0, 1, ...) of `launches` that got the ring when `ring_wanted`, else those that
// did not; launch n of kind `ring` measured at rate(ring, n).
std::vector<std::uint64_t> launches_of(kind_learner& l, std::uint64_t launches, bool ring_wanted,
                                       const std::function<double(bool, std::uint64_t)>& rate) {
  std::vector<std::uint64_t> got;
  for (std::uint64_t n = 0; n < launches; ++n) {
    const bool ring = l.choose();
    if (ring == ring_wanted) got.push_back(n);
    l.record(ring, rate(ring, n));
  }
  return got;
}

TEST(TxKind, MeasuresBothKindsFirstThenTakesTheFaster) {
  for (const bool ring_faster : {true, false}) {
    kind_learner l;
    EXPECT_EQ(l.rate(true), -1.0);
    EXPECT_EQ(l.rate(false), -1.0);
    const auto rate = [&](bool ring, std::uint64_t) { return ring == ring_faster ? 3.0 : 1.0; };
    EXPECT_TRUE(l.choose()) << "the first launch measures the ring";
    l.record(true, rate(true, 0));
    EXPECT_FALSE(l.choose()) << "the second measures direct commits";
    l.record(false, rate(false, 1));
    for (int n = 2; n < 2 + static_cast<int>(kReprobeEvery) - 2; ++n) {
      EXPECT_EQ(l.choose(), ring_faster) << "launch " << n;
    }
    EXPECT_EQ(l.rate(true), ring_faster ? 3.0 : 1.0);
  }
}

// The kind that keeps losing is measured again after 16 launches, then 32, 64, ... up to 1024
// (launch 1 measured direct commits first).
TEST(TxKind, WaitsTwiceAsLongEachTimeTheLoserLosesAgain) {
  kind_learner l;
  const auto direct = launches_of(l, 5000, false, [](bool ring, std::uint64_t) {
    return ring ? 3.0 : 1.0;
  });
  std::vector<std::uint64_t> want{1};
  for (std::uint64_t wait = kReprobeEvery; want.back() + wait < 5000;
       wait = std::min(2 * wait, kReprobeMost)) {
    want.push_back(want.back() + wait);
  }
  EXPECT_EQ(direct, want);
  ASSERT_GE(want.size(), 3u);
  EXPECT_EQ(want[1], 17u);
  EXPECT_EQ(want[2], 49u);
  EXPECT_EQ(want.back() - want[want.size() - 2], kReprobeMost);
}

// When the other kind wins its re-measurement, it takes over, and the wait for the new loser
// starts again at 16.
TEST(TxKind, AWinnerChangeStartsTheWaitAgain) {
  kind_learner l;
  // Direct commits are slower until launch 49 (its third measurement), faster from then on.
  const auto ring = launches_of(l, 200, true, [](bool ring, std::uint64_t n) {
    return ring ? 3.0 : n >= 49 ? 5.0 : 1.0;
  });
  std::vector<std::uint64_t> want{0};
  for (std::uint64_t n = 2; n < 49; ++n) {
    if (n != 17) want.push_back(n);
  }
  // Ring last ran at 48: measured again at 64, then 96 (32 later), then 160 (64 later).
  for (std::uint64_t n : {64, 96, 160}) want.push_back(n);
  EXPECT_EQ(ring, want);
}

}  // namespace
