// Straggler detection (monitor/straggler.h) against a direct re-computation: per-rank ratio to
// the median and the k-consecutive-steps rule.
#include "brigade/monitor/straggler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "brigade/base/error.h"

namespace brigade {
namespace {

// The median as a textbook defines it, computed without the detector's code path.
double naive_median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (static_cast<double>(v[n / 2 - 1]) + v[n / 2]) / 2;
}

TEST(Straggler, RatioToTheMedianForOddAndEvenRankCounts) {
  StragglerDetector three(3);
  std::vector<float> t{10, 30, 20};  // median 20
  auto r = three.observe(t);
  EXPECT_DOUBLE_EQ(r.median, 20);
  ASSERT_EQ(r.ratio.size(), 3u);
  EXPECT_DOUBLE_EQ(r.ratio[0], 0.5);
  EXPECT_DOUBLE_EQ(r.ratio[1], 1.5);
  EXPECT_DOUBLE_EQ(r.ratio[2], 1.0);
  EXPECT_DOUBLE_EQ(r.max_ratio, 1.5);
  EXPECT_EQ(r.slowest_rank, 1);

  StragglerDetector two(2);
  std::vector<float> u{10, 15};  // median 12.5
  r = two.observe(u);
  EXPECT_DOUBLE_EQ(r.median, 12.5);
  EXPECT_DOUBLE_EQ(r.ratio[1], 1.2);
}

TEST(Straggler, FlagsOnlyAfterKConsecutiveSlowSteps) {
  StragglerDetector d(5, {.threshold = 1.2, .consecutive = 3, .warmup_steps = 0});
  // Median 10 in every step below: ratios 1.3 and 1.4 for the slow ranks.
  std::vector<float> even{10, 10, 10, 10, 10}, slow2{10, 10, 13, 10, 10},
      slow23{10, 10, 13, 14, 10};
  EXPECT_EQ(d.observe(slow2).straggler_rank, -1);
  EXPECT_EQ(d.observe(slow2).straggler_rank, -1);
  auto r = d.observe(slow2);  // third slow step in a row
  EXPECT_EQ(r.straggler_rank, 2);
  EXPECT_EQ(std::vector<int>(r.flagged.begin(), r.flagged.end()), std::vector<int>{2});
  // One normal step clears the count.
  EXPECT_EQ(d.observe(even).straggler_rank, -1);
  EXPECT_EQ(d.observe(slow2).straggler_rank, -1);
  EXPECT_EQ(d.observe(slow23).straggler_rank, -1);
  r = d.observe(slow23);  // rank 2: third slow step; rank 3: second
  EXPECT_EQ(std::vector<int>(r.flagged.begin(), r.flagged.end()), std::vector<int>{2});
  EXPECT_EQ(r.straggler_rank, 2);
  EXPECT_EQ(r.slowest_rank, 3) << "the slowest rank of one step is not yet a straggler";
  r = d.observe(slow23);  // both flagged: both listed, the slower one reported
  EXPECT_EQ(std::vector<int>(r.flagged.begin(), r.flagged.end()), (std::vector<int>{2, 3}));
  EXPECT_EQ(r.straggler_rank, 3);
}

TEST(Straggler, RandomStepsMatchANaiveRecount) {
  const int world = 5, k = 2;
  const double threshold = 1.25;
  StragglerDetector d(world, {.threshold = threshold, .consecutive = k, .warmup_steps = 0});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> base(8, 12), slow(0, 1);
  std::vector<int> streak(world, 0);
  for (int step = 0; step < 200; ++step) {
    std::vector<float> t(world);
    for (auto& x : t) x = base(rng) * (slow(rng) < 0.3f ? 1.6f : 1.0f);
    const double median = naive_median(t);
    auto r = d.observe(t);
    ASSERT_NEAR(r.median, median, 1e-9 * median);
    std::vector<int> expect_flagged;
    double max_ratio = -1;
    int slowest = -1;
    for (int i = 0; i < world; ++i) {
      const double ratio = t[i] / median;
      ASSERT_NEAR(r.ratio[i], ratio, 1e-12) << "step " << step << " rank " << i;
      streak[i] = ratio >= threshold ? streak[i] + 1 : 0;
      if (streak[i] >= k) expect_flagged.push_back(i);
      if (ratio > max_ratio) max_ratio = ratio, slowest = i;
    }
    EXPECT_EQ(std::vector<int>(r.flagged.begin(), r.flagged.end()), expect_flagged) << step;
    EXPECT_EQ(r.slowest_rank, slowest) << step;
    EXPECT_NEAR(r.max_ratio, max_ratio, 1e-12);
  }
}

// The first step builds kernel primitives and touches pages for the first time, unevenly across
// ranks: it reports its ratios but counts for nobody, so a rank slow from the start is flagged
// `consecutive` steps after the warm-up.
TEST(Straggler, WarmupStepsReportRatiosButCountForNobody) {
  StragglerDetector d(3, {.threshold = 1.2, .consecutive = 2, .warmup_steps = 1});
  std::vector<float> slow2{10, 10, 30};
  auto r = d.observe(slow2);
  EXPECT_DOUBLE_EQ(r.max_ratio, 3.0);
  EXPECT_EQ(r.slowest_rank, 2);
  EXPECT_EQ(r.straggler_rank, -1);
  EXPECT_EQ(d.observe(slow2).straggler_rank, -1);  // first counted slow step
  EXPECT_EQ(d.observe(slow2).straggler_rank, 2);   // second: flagged
}

TEST(Straggler, TimesThatAreNotTimesCountAsZero) {
  StragglerDetector d(3, {.threshold = 1.2, .consecutive = 1, .warmup_steps = 0});
  std::vector<float> t{std::numeric_limits<float>::quiet_NaN(), 10, -5};  // -> {0, 10, 0}
  auto r = d.observe(t);
  EXPECT_DOUBLE_EQ(r.median, 0);
  for (double x : r.ratio) EXPECT_DOUBLE_EQ(x, 1.0);  // a zero median says nothing
  EXPECT_EQ(r.straggler_rank, -1);
}

TEST(Straggler, InvalidOptionsAreConfigErrors) {
  EXPECT_THROW(StragglerDetector(2, {.threshold = 1.0}), ConfigError);
  EXPECT_THROW(StragglerDetector(2, {.threshold = std::nan("")}), ConfigError);
  EXPECT_THROW(StragglerDetector(2, {.consecutive = 0}), ConfigError);
  EXPECT_THROW(StragglerDetector(2, {.warmup_steps = -1}), ConfigError);
}

}  // namespace
}  // namespace brigade
