// The GPT parameter layout: GPT-2 names in forward order, shapes, contiguous offsets, the
// closed-form parameter count, flags, and initialisation statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/gpt.h"

namespace brigade {
namespace {

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
  bool decay;
  TpSplit split;
};

// The layout written out independently of the model code.
std::vector<Expected> expected_layout(int64_t V, int64_t T, int64_t C, int64_t L) {
  const auto R = TpSplit::kReplicated, D0 = TpSplit::kDim0, D1 = TpSplit::kDim1;
  std::vector<Expected> e = {{"wte.weight", {V, C}, true, D0}, {"wpe.weight", {T, C}, true, R}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    e.push_back({h + "ln_1.weight", {C}, false, R});
    e.push_back({h + "ln_1.bias", {C}, false, R});
    e.push_back({h + "attn.c_attn.weight", {3 * C, C}, true, D0});
    e.push_back({h + "attn.c_attn.bias", {3 * C}, false, D0});
    e.push_back({h + "attn.c_proj.weight", {C, C}, true, D1});
    e.push_back({h + "attn.c_proj.bias", {C}, false, R});
    e.push_back({h + "ln_2.weight", {C}, false, R});
    e.push_back({h + "ln_2.bias", {C}, false, R});
    e.push_back({h + "mlp.c_fc.weight", {4 * C, C}, true, D0});
    e.push_back({h + "mlp.c_fc.bias", {4 * C}, false, D0});
    e.push_back({h + "mlp.c_proj.weight", {C, 4 * C}, true, D1});
    e.push_back({h + "mlp.c_proj.bias", {C}, false, R});
  }
  e.push_back({"ln_f.weight", {C}, false, R});
  e.push_back({"ln_f.bias", {C}, false, R});
  return e;
}

double rms(const float* p, int64_t n) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(p[i]) * p[i];
  return std::sqrt(sq / static_cast<double>(n));
}

TEST(GptLayout, NamesShapesOffsetsAndCount) {
  const int64_t V = 50, T = 16, C = 32, L = 2;
  Gpt model({.vocab = V, .seq_len = T, .d_model = C, .n_layer = L, .n_head = 4}, 1);
  const auto want = expected_layout(V, T, C, L);
  const auto& specs = model.layout().specs();
  ASSERT_EQ(specs.size(), want.size());
  int64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(specs[i].name, want[i].name);
    EXPECT_EQ(specs[i].shape, want[i].shape);
    EXPECT_EQ(specs[i].offset, offset);
    EXPECT_EQ(specs[i].weight_decay, want[i].decay);
    EXPECT_EQ(specs[i].tp_split, want[i].split);
    offset += specs[i].numel;
  }
  EXPECT_EQ(model.num_params(), V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C);
  EXPECT_EQ(model.num_params(), offset);
}

TEST(GptLayout, InitStatistics) {
  const int64_t L = 2;
  Gpt model({.vocab = 256, .seq_len = 64, .d_model = 64, .n_layer = L, .n_head = 4}, 1);
  model.initialize(42);
  const float* p = model.params();
  // Tensors have >= 4096 elements: the sample rms is within ~1.1% (1 sigma) of the std.
  for (const ParamSpec& s : model.layout().specs()) {
    SCOPED_TRACE(s.name);
    const float* t = p + s.offset;
    if (s.name.ends_with("c_proj.weight")) {
      EXPECT_NEAR(rms(t, s.numel), 0.02 / std::sqrt(2.0 * L), 0.001);
    } else if (s.shape.size() == 2) {
      EXPECT_NEAR(rms(t, s.numel), 0.02, 0.001);
      double mean = 0.0;
      for (int64_t i = 0; i < s.numel; ++i) mean += t[i];
      EXPECT_NEAR(mean / static_cast<double>(s.numel), 0.0, 0.002);
    } else {
      const float want = s.name.ends_with("ln_1.weight") || s.name.ends_with("ln_2.weight") ||
                                 s.name == "ln_f.weight"
                             ? 1.0f
                             : 0.0f;
      for (int64_t i = 0; i < s.numel; ++i) ASSERT_EQ(t[i], want) << i;
    }
  }
}

TEST(GptLayout, InitOfATensorDoesNotDependOnOtherTensors) {
  // A different vocabulary shifts every offset after wte; a different depth adds tensors.
  // Same-named tensors with the same shape and std must still get the same values.
  const GptConfig a{.vocab = 50, .seq_len = 16, .d_model = 32, .n_layer = 2, .n_head = 4};
  GptConfig b = a;
  b.vocab = 61;
  Gpt ma(a, 1), mb(b, 1);
  ma.initialize(7);
  mb.initialize(7);
  int compared = 0;
  for (const ParamSpec& s : ma.layout().specs()) {
    if (s.name == "wte.weight") continue;
    const ParamSpec& t = mb.layout().at(s.name);
    ASSERT_NE(s.offset, t.offset);
    for (int64_t i = 0; i < s.numel; ++i)
      ASSERT_EQ(ma.params()[s.offset + i], mb.params()[t.offset + i]) << s.name << " " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 1 + 12 * 2 + 2);

  GptConfig c = a;
  c.n_layer = 3;  // changes the c_proj std, not the others
  Gpt mc(c, 1);
  mc.initialize(7);
  for (const std::string name : {"wpe.weight", "h.1.attn.c_attn.weight", "h.1.mlp.c_fc.weight"}) {
    const ParamSpec& s = ma.layout().at(name);
    const ParamSpec& t = mc.layout().at(name);
    for (int64_t i = 0; i < s.numel; ++i)
      ASSERT_EQ(ma.params()[s.offset + i], mc.params()[t.offset + i]) << name << " " << i;
  }
  // A different seed gives different values.
  Gpt md(a, 1);
  md.initialize(8);
  EXPECT_NE(ma.params()[0], md.params()[0]);
}

TEST(GptLayout, ConfigValidation) {
  EXPECT_THROW(Gpt({.vocab = 11, .seq_len = 5, .d_model = 9, .n_layer = 1, .n_head = 2}, 1),
               ConfigError);
  EXPECT_THROW(Gpt({.vocab = 0}, 1), ConfigError);
  EXPECT_THROW(Gpt({}, 0), ConfigError);
}

}  // namespace
}  // namespace brigade
