// train.freeze below the trainer: which names a pattern freezes, the mask's flat ranges, an
// optimizer that leaves frozen tensors (and their state) untouched while stepping the others
// exactly as an unfrozen one does, gradient buckets that leave frozen ranges out, and the
// refusal of a pattern that names nothing or of freezing everything.
#include "brigade/optim/trainable_mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "brigade/base/error.h"
#include "brigade/optim/optimizer.h"
#include "brigade/parallel/grad_buckets.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

// wte (6) | h.0.w (4, decayed) | h.0.b (2) | h.10.w (4) | ln_f.b (3): 19 floats.
ParamLayout small_layout() {
  ParamLayout l;
  l.add({.name = "wte.weight", .shape = {3, 2}, .numel = 6});
  l.add({.name = "h.0.w", .shape = {2, 2}, .numel = 4});
  l.add({.name = "h.0.b", .shape = {2}, .numel = 2, .weight_decay = false});
  l.add({.name = "h.10.w", .shape = {2, 2}, .numel = 4});
  l.add({.name = "ln_f.b", .shape = {3}, .numel = 3, .weight_decay = false});
  return l;
}

TEST(FreezePattern, GlobsAndModulePrefixes) {
  EXPECT_TRUE(freeze_pattern_matches("wte", "wte.weight"));  // a module names its tensors
  EXPECT_TRUE(freeze_pattern_matches("wte.weight", "wte.weight"));
  EXPECT_TRUE(freeze_pattern_matches("h.0.*", "h.0.attn.c_attn.weight"));
  EXPECT_TRUE(freeze_pattern_matches("h.0", "h.0.attn.c_attn.weight"));
  EXPECT_FALSE(freeze_pattern_matches("h.0", "h.10.attn.c_attn.weight"));
  EXPECT_FALSE(freeze_pattern_matches("h.1.*", "h.10.ln_1.weight"));
  EXPECT_TRUE(freeze_pattern_matches("h.1*", "h.10.ln_1.weight"));
  EXPECT_TRUE(freeze_pattern_matches("*.bias", "h.3.mlp.c_fc.bias"));  // '*' crosses dots
  EXPECT_TRUE(freeze_pattern_matches("h.[01].ln_?.*", "h.1.ln_2.bias"));
  EXPECT_FALSE(freeze_pattern_matches("wt", "wte.weight"));
  EXPECT_FALSE(freeze_pattern_matches("weight", "wte.weight"));
}

TEST(TrainableMask, MergesNeighboursAndZeroesOnlyFrozenGradients) {
  const ParamLayout l = small_layout();
  const TrainableMask mask(l, {"wte", "h.0.*", "ln_f.b"});
  ASSERT_EQ(mask.frozen().size(), 2u);
  EXPECT_EQ(mask.frozen()[0].begin, 0);
  EXPECT_EQ(mask.frozen()[0].end, 12);  // wte, h.0.w and h.0.b merged
  EXPECT_EQ(mask.frozen()[1].begin, 16);
  EXPECT_EQ(mask.frozen()[1].end, 19);
  EXPECT_EQ(mask.frozen_count(), 15);
  std::vector<float> g(19, 1.0f);
  mask.zero_frozen(g.data(), 4, 19);  // a sub-range, as a ZeRO shard zeroes its own part
  for (int i = 0; i < 19; ++i) {
    EXPECT_EQ(g[i], (i >= 4 && i < 12) || i >= 16 ? 0.0f : 1.0f) << i;
  }
  const auto parts = mask.trainable_parts(0, 19);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].begin, 12);
  EXPECT_EQ(parts[0].end, 16);
  EXPECT_TRUE(TrainableMask(l, {}).empty());
  EXPECT_EQ(TrainableMask(l, {}).trainable_parts(0, 19).size(), 1u);
}

// The frozen tensors keep their values bitwise, their optimizer state stays zero (no update,
// no weight decay), and every trainable element takes the same steps as without freezing.
TEST(TrainableMask, OptimizersSkipFrozenTensorsAndStepTheOthersAsBefore) {
  const ParamLayout l = small_layout();
  for (const char* name : {"adamw", "sgd"}) {
    OptimizerConfig plain{.name = name, .weight_decay = 0.5f};
    OptimizerConfig frozen = plain;
    frozen.freeze = {"wte", "h.0.b"};
    auto a = make_optimizer(plain, l, 0, l.total());
    auto b = make_optimizer(frozen, l, 0, l.total());
    std::vector<float> pa(19), pb(19), g(19);
    std::iota(pa.begin(), pa.end(), 1.0f);
    pb = pa;
    const std::vector<float> start = pa;
    for (int t = 1; t <= 3; ++t) {
      for (int i = 0; i < 19; ++i) g[i] = 0.1f * static_cast<float>((i * 7 + t) % 5) - 0.2f;
      a->step(pa.data(), g.data(), 0, 19, 0.01f, t);
      b->step(pb.data(), g.data(), 0, 19, 0.01f, t);
    }
    for (int i = 0; i < 19; ++i) {
      const bool is_frozen = i < 6 || (i >= 10 && i < 12);
      if (is_frozen) {
        EXPECT_EQ(pb[i], start[i]) << name << " " << i;
        EXPECT_NE(pa[i], start[i]) << name << " " << i;  // the test can fail
      } else {  // (to rounding: the kernels may vectorise a segment's elements differently)
        EXPECT_FLOAT_EQ(pb[i], pa[i]) << name << " " << i;
      }
    }
    for (const StateView& v : b->state_tensors()) {
      for (int i = 0; i < 6; ++i) EXPECT_EQ(v.data[i], 0.0f) << v.name << " " << i;
      EXPECT_NE(v.data[6], 0.0f) << v.name;
    }
  }
}

TEST(TrainableMask, GradientBucketsLeaveFrozenRangesOut) {
  const ParamLayout l = small_layout();
  const TrainableMask mask(l, {"h.0"});  // [6, 12) frozen
  const auto buckets = plan_grad_buckets(19, 4, mask);
  // [12, 19) cut from its end, then [0, 6): none spans or touches the frozen range.
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const GradBucket& b : buckets) got.emplace_back(b.begin, b.end);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{15, 19}, {12, 15}, {2, 6}, {0, 2}}));
  // Without a mask, the plan is the one DDP always used.
  const auto plain = plan_grad_buckets(19, 4);
  ASSERT_EQ(plain.size(), 5u);
  EXPECT_EQ(plain.front().begin, 15);
  EXPECT_EQ(plain.back().begin, 0);
  EXPECT_EQ(plain.back().end, 3);
}

TEST(TrainableMask, APatternThatNamesNothingOrFreezingEverythingIsRefused) {
  const ParamLayout l = small_layout();
  const FreezeSummary s = check_freeze_patterns(l, {"wte", "h.0.*"});
  EXPECT_EQ(s.frozen_params, 12);
  EXPECT_EQ(s.frozen_tensors, 3);
  EXPECT_EQ(s.total_params, 19);
  EXPECT_EQ(describe_freeze(s),
            "train.freeze: 12 of 19 parameters frozen (3 tensors); 7 trainable");
  EXPECT_EQ(describe_freeze({.frozen_params = 1234, .total_params = 1234567, .frozen_tensors = 1}),
            "train.freeze: 1,234 of 1,234,567 parameters frozen (1 tensor); 1,233,333 trainable");
  try {
    check_freeze_patterns(l, {"wte", "h.2.*"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.freeze"));
    EXPECT_THAT(e.what(), HasSubstr("\"h.2.*\""));
    EXPECT_THAT(e.what(), HasSubstr("wte.weight, h.0.w"));
  }
  try {
    check_freeze_patterns(l, {"*"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("every parameter"));
  }
}

}  // namespace
}  // namespace brigade
