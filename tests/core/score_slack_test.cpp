// ScoreSlack (core/score_slack.hpp): the pruning slack both engines use.
#include "core/score_slack.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

namespace search {
namespace {

// The slack is at least kScoreSlack, never shrinks as queries grow, and always exceeds the
// relative rounding bound 1 + 8 (n + 2) 2^-24 it is defined to cover.
TEST(ScoreSlack, CoversTheRoundingOfTwoNTermSums) {
  float prev = 0.0f;
  for (size_t n = 0; n <= 4096; ++n) {
    const float s = ScoreSlack(n);
    EXPECT_GE(s, kScoreSlack) << n;
    EXPECT_GE(s, prev) << n;
    EXPECT_GT(static_cast<double>(s), 1.0 + 8.0 * static_cast<double>(n + 2) * std::ldexp(1.0, -24)) << n;
    prev = s;
  }
}

// Short queries use kScoreSlack itself; from 19 terms the slack is widened past it.
TEST(ScoreSlack, WidensOnlyForLongQueries) {
  for (size_t n = 0; n <= 18; ++n) EXPECT_EQ(ScoreSlack(n), kScoreSlack) << n;
  EXPECT_GT(ScoreSlack(19), kScoreSlack);
  EXPECT_GT(ScoreSlack(1000), ScoreSlack(100));
}

}  // namespace
}  // namespace search
