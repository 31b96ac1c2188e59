// The adaptive mode's residency learner (src/tx/residency.hpp), driven with made-up commit rates:
// the launches it asks for, measured as given, until it settles and when it measures again.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "residency.hpp"

namespace {

using gpm::detail::tx::kReprobeEvery;
using gpm::detail::tx::residency_learner;

// The blocks an SM each of `launches` launches got, each measured at rate(blocks).
std::vector<std::uint32_t> run(residency_learner& l, std::uint32_t most, int launches,
                               const std::function<double(std::uint32_t)>& rate) {
  std::vector<std::uint32_t> got;
  for (int i = 0; i < launches; ++i) {
    const std::uint32_t b = l.choose(most);
    got.push_back(b);
    l.record(b, rate(b));
  }
  return got;
}

TEST(TxResidency, StepsDownWhileFasterAndKeepsTheFastest) {
  residency_learner l;
  EXPECT_EQ(l.best_rate(), -1.0) << "nothing measured";
  // Fastest at 2 of 3: 3, then 2 (faster), then 1 (slower), then 2 from then on.
  const auto got = run(l, 3, 10, [](std::uint32_t b) { return b == 2 ? 3.0 : b == 3 ? 2.0 : 1.0; });
  EXPECT_EQ(got, (std::vector<std::uint32_t>{3, 2, 1, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(l.best(), 2u);
  EXPECT_EQ(l.best_rate(), 3.0);
}

TEST(TxResidency, StopsAtTheFirstSlowerStep) {
  residency_learner l;
  // Uncapped is fastest: one step down, slower, and back; 1 never tried.
  const auto got = run(l, 4, 6, [](std::uint32_t b) { return double(b); });
  EXPECT_EQ(got, (std::vector<std::uint32_t>{4, 3, 4, 4, 4, 4}));
}

TEST(TxResidency, GoesDownToOneBlockWhileEachStepIsFaster) {
  residency_learner l;
  const auto got = run(l, 3, 5, [](std::uint32_t b) { return 10.0 - b; });
  EXPECT_EQ(got, (std::vector<std::uint32_t>{3, 2, 1, 1, 1}));
}

TEST(TxResidency, MeasuresTheNeighboursAgainAndFollowsAChange) {
  residency_learner l;
  double at2 = 3.0;
  const auto rate = [&](std::uint32_t b) { return b == 2 ? at2 : b == 3 ? 2.0 : 1.0; };
  run(l, 3, 4, rate);  // 3, 2, 1, settled at 2
  // kReprobeEvery launches after settling, a neighbour: below (1) first, then above (3).
  std::vector<std::uint32_t> got = run(l, 3, 2 * kReprobeEvery + 1, rate);
  std::vector<std::uint32_t> want(got.size(), 2);
  want[kReprobeEvery - 1] = 1;
  want[2 * kReprobeEvery - 1] = 3;
  EXPECT_EQ(got, want);
  // The data changed: 2 is now slower than 3, found at the next look at 3.
  at2 = 1.5;
  got = run(l, 3, 2 * kReprobeEvery + 2, rate);
  EXPECT_EQ(got.back(), 3u) << "after measuring both again, the uncapped launch is the fastest";
}

TEST(TxResidency, AnUnmeasuredLaunchIsAskedForAgain) {
  residency_learner l;
  EXPECT_EQ(l.choose(3), 3u);  // not recorded: a launch still running when the next was planned
  EXPECT_EQ(l.choose(3), 3u);
  l.record(3, 2.0);
  EXPECT_EQ(l.choose(3), 2u);
  EXPECT_EQ(l.choose(3), 2u);  // 2 not recorded either
  l.record(2, 1.0);
  EXPECT_EQ(l.choose(3), 3u);
}

TEST(TxResidency, AShapeThatFitsOtherwiseStartsAfresh) {
  residency_learner l;
  run(l, 3, 4, [](std::uint32_t b) { return b == 2 ? 3.0 : 1.0; });
  EXPECT_EQ(l.choose(3), 2u);
  EXPECT_EQ(l.choose(2), 2u) << "a new most: measured uncapped first";
  EXPECT_EQ(l.choose(1), 1u) << "one block an SM: nothing to choose";
  EXPECT_EQ(l.choose(1), 1u);
}

}  // namespace
