// Optimizer classes against naive per-element loops, range splitting, per-tensor weight
// decay, state views and the factory's validation.
#include "brigade/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/tensor/param_spec.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

// Decay and no-decay tensors interleaved, with odd sizes so split points fall mid-tensor.
ParamLayout small_layout() {
  ParamLayout layout;
  layout.add({.name = "a.weight", .shape = {3, 5}, .weight_decay = true});
  layout.add({.name = "a.bias", .shape = {5}, .weight_decay = false});
  layout.add({.name = "b.weight", .shape = {4, 3}, .weight_decay = true});
  layout.add({.name = "c.weight", .shape = {7}, .weight_decay = true});  // merges with b
  layout.add({.name = "ln.weight", .shape = {6}, .weight_decay = false});
  return layout;
}

std::vector<float> random_vector(int64_t n, uint64_t key, float std = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, std, 123, key);
  return v;
}

// Decay flag of every flat element, read off the layout independently of the optimizer.
std::vector<bool> decay_mask(const ParamLayout& layout) {
  std::vector<bool> mask;
  for (const auto& s : layout.specs())
    mask.insert(mask.end(), static_cast<size_t>(s.numel), s.weight_decay);
  return mask;
}

TEST(AdamW, MatchesNaiveLoopWithPerTensorDecay) {
  const ParamLayout layout = small_layout();
  const int64_t n = layout.total();
  const OptimizerConfig cfg{.beta1 = 0.8f, .beta2 = 0.9f, .eps = 1e-6f, .weight_decay = 0.3f};
  auto opt = make_optimizer(cfg, layout, 0, n);
  std::vector<float> p = random_vector(n, 1);
  std::vector<double> ref(p.begin(), p.end()), m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  const auto mask = decay_mask(layout);
  const float lr = 0.05f;
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<float> g = random_vector(n, 10 + static_cast<uint64_t>(t));
    opt->step(p.data(), g.data(), 0, n, lr, t);
    for (size_t i = 0; i < ref.size(); ++i) {
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g[i];
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(cfg.beta1, t));
      const double vhat = v[i] / (1 - std::pow(cfg.beta2, t));
      const double wd = mask[i] ? cfg.weight_decay : 0.0;
      ref[i] -= lr * (mhat / (std::sqrt(vhat) + cfg.eps) + wd * ref[i]);
    }
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(p[i], ref[i], 1e-5) << "t " << t << " i " << i;
  }
  const auto state = opt->state_tensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].name, "adamw.m");
  EXPECT_EQ(state[1].name, "adamw.v");
  for (size_t i = 0; i < m.size(); ++i) {
    ASSERT_NEAR(state[0].data[i], m[i], 1e-6);
    ASSERT_NEAR(state[1].data[i], v[i], 1e-6);
  }
}

TEST(AdamW, DecayOnlyTouchesDecayTensors) {
  // With zero gradients Adam's step is 0/(0 + eps) = 0, so only decay moves a parameter.
  const ParamLayout layout = small_layout();
  const int64_t n = layout.total();
  auto opt = make_optimizer({.weight_decay = 0.5f}, layout, 0, n);
  std::vector<float> p = random_vector(n, 2);
  const std::vector<float> before = p, zeros(static_cast<size_t>(n), 0.0f);
  opt->step(p.data(), zeros.data(), 0, n, 0.1f, 1);
  const auto mask = decay_mask(layout);
  for (size_t i = 0; i < p.size(); ++i) {
    if (mask[i])
      ASSERT_FLOAT_EQ(p[i], before[i] * (1.0f - 0.1f * 0.5f)) << i;
    else
      ASSERT_EQ(p[i], before[i]) << i;
  }
}

TEST(AdamW, SplitRangeEqualsFullRange) {
  const ParamLayout layout = small_layout();
  const int64_t n = layout.total();
  for (int64_t cut : {int64_t{1}, int64_t{7}, int64_t{20}, int64_t{31}, n - 1}) {
    SCOPED_TRACE(cut);
    auto full = make_optimizer({}, layout, 0, n);
    auto split = make_optimizer({}, layout, 0, n);
    // ZeRO-style: two optimizers that each own half of the state.
    auto lo = make_optimizer({}, layout, 0, cut);
    auto hi = make_optimizer({}, layout, cut, n);
    std::vector<float> pf = random_vector(n, 3), ps = pf, pz = pf;
    for (int64_t t = 1; t <= 2; ++t) {
      const std::vector<float> g = random_vector(n, 20 + static_cast<uint64_t>(t));
      full->step(pf.data(), g.data(), 0, n, 0.01f, t);
      split->step(ps.data(), g.data(), 0, cut, 0.01f, t);
      split->step(ps.data(), g.data(), cut, n, 0.01f, t);
      lo->step(pz.data(), g.data(), 0, cut, 0.01f, t);
      hi->step(pz.data(), g.data(), cut, n, 0.01f, t);
    }
    EXPECT_EQ(pf, ps);
    EXPECT_EQ(pf, pz);
    // The shard optimizers' state views cover their own ranges.
    EXPECT_EQ(hi->state_tensors()[0].begin, cut);
    EXPECT_EQ(hi->state_tensors()[0].end, n);
    EXPECT_EQ(hi->state_tensors()[0].data[0], full->state_tensors()[0].data[cut]);
  }
}

TEST(Sgd, MatchesNaiveLoop) {
  const ParamLayout layout = small_layout();
  const int64_t n = layout.total();
  const auto mask = decay_mask(layout);
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov);
    const OptimizerConfig cfg{
        .name = "sgd", .weight_decay = 0.01f, .momentum = 0.7f, .nesterov = nesterov};
    auto opt = make_optimizer(cfg, layout, 5, n - 3);  // a range cutting two tensors
    std::vector<float> p = random_vector(n, 4);
    std::vector<double> ref(p.begin(), p.end()), buf(static_cast<size_t>(n), 0.0);
    for (int64_t t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_vector(n, 30 + static_cast<uint64_t>(t));
      opt->step(p.data(), g.data(), 5, n - 3, 0.1f, t);
      for (int64_t i = 5; i < n - 3; ++i) {
        const double gi = g[i] + (mask[i] ? cfg.weight_decay : 0.0) * ref[i];
        buf[i] = cfg.momentum * buf[i] + gi;
        ref[i] -= 0.1 * (nesterov ? gi + cfg.momentum * buf[i] : buf[i]);
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref[i], 1e-5) << "t " << t << " i " << i;
    }
    const auto state = opt->state_tensors();
    ASSERT_EQ(state.size(), 1u);
    EXPECT_EQ(state[0].name, "sgd.momentum");
    EXPECT_EQ(state[0].begin, 5);
    EXPECT_NEAR(state[0].data[0], buf[5], 1e-5);
  }
}

TEST(Sgd, ZeroMomentumKeepsNoState) {
  const ParamLayout layout = small_layout();
  const int64_t n = layout.total();
  auto opt = make_optimizer({.name = "sgd", .weight_decay = 0.0f, .momentum = 0.0f}, layout, 0, n);
  EXPECT_TRUE(opt->state_tensors().empty());
  std::vector<float> p = random_vector(n, 5);
  const std::vector<float> before = p, g = random_vector(n, 6);
  opt->step(p.data(), g.data(), 0, n, 0.5f, 1);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_FLOAT_EQ(p[i], before[i] - 0.5f * g[i]);
}

TEST(OptimizerConfig, RejectsInvalidValues) {
  const ParamLayout layout = small_layout();
  EXPECT_THROW(make_optimizer({.name = "lion"}, layout, 0, 1), ConfigError);
  EXPECT_THROW(make_optimizer({.beta1 = 1.0f}, layout, 0, 1), ConfigError);
  EXPECT_THROW(make_optimizer({.beta2 = -0.1f}, layout, 0, 1), ConfigError);
  EXPECT_THROW(make_optimizer({.eps = 0.0f}, layout, 0, 1), ConfigError);
  EXPECT_THROW(make_optimizer({.weight_decay = -1.0f}, layout, 0, 1), ConfigError);
  EXPECT_THROW(make_optimizer({.name = "sgd", .momentum = 0.0f, .nesterov = true}, layout, 0, 1),
               ConfigError);
  try {
    make_optimizer({.beta1 = 2.0f}, layout, 0, 1);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.beta1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade
