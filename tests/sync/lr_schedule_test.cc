// The learning-rate schedule at closed-form points.
#include "brigade/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "brigade/base/error.h"

namespace brigade {
namespace {

const LrSchedule kSched{.max_lr = 1.0f, .min_lr = 0.1f, .warmup = 10, .total = 110};

TEST(LrSchedule, WarmupIsLinear) {
  EXPECT_FLOAT_EQ(lr_at(kSched, 0), 0.1f);  // (0 + 1) / 10
  EXPECT_FLOAT_EQ(lr_at(kSched, 4), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(kSched, 9), 1.0f);
}

TEST(LrSchedule, CosineFromPeakToFloor) {
  EXPECT_FLOAT_EQ(lr_at(kSched, 10), 1.0f);  // cos(0)
  // Midpoint of the cosine: (min + max) / 2.
  EXPECT_FLOAT_EQ(lr_at(kSched, 60), 0.55f);
  // A quarter in: min + (max - min) (1 + cos(pi/4)) / 2.
  EXPECT_NEAR(lr_at(kSched, 35), 0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2, 1e-6);
  EXPECT_FLOAT_EQ(lr_at(kSched, 110), 0.1f);
  EXPECT_FLOAT_EQ(lr_at(kSched, 1000), 0.1f);
  for (int64_t s = 10; s < 110; ++s) EXPECT_GE(lr_at(kSched, s), lr_at(kSched, s + 1)) << s;
}

TEST(LrSchedule, NoWarmupNoDecay) {
  const LrSchedule s{.max_lr = 0.3f, .min_lr = 0.0f, .warmup = 0, .total = 0};
  EXPECT_FLOAT_EQ(lr_at(s, 0), 0.3f);
  EXPECT_FLOAT_EQ(lr_at(s, 12345), 0.3f);
  const LrSchedule d{.max_lr = 0.3f, .min_lr = 0.0f, .warmup = 0, .total = 4};
  EXPECT_FLOAT_EQ(lr_at(d, 0), 0.3f);
  EXPECT_NEAR(lr_at(d, 2), 0.15f, 1e-7);
  EXPECT_FLOAT_EQ(lr_at(d, 4), 0.0f);
}

TEST(LrSchedule, Validation) {
  EXPECT_NO_THROW(kSched.validate());
  EXPECT_THROW((LrSchedule{.max_lr = 0.0f}.validate()), ConfigError);
  EXPECT_THROW((LrSchedule{.max_lr = 1.0f, .min_lr = 2.0f}.validate()), ConfigError);
  EXPECT_THROW((LrSchedule{.warmup = -1}.validate()), ConfigError);
  EXPECT_THROW((LrSchedule{.warmup = 10, .total = 5}.validate()), ConfigError);
}

}  // namespace
}  // namespace brigade
