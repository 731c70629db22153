// The split block backward (gpt_block.h: block_backward_input = ZB-H1's B, block_backward_weight =
// W) against the fused one (block_backward_mlp + block_backward_attention) on one block, tp = 1:
//   - after B, the gradient of the block input and the layernorm gradients are bitwise the
//     fused ones, and no matmul weight or bias gradient has been touched;
//   - after W every gradient is bitwise the fused one (the same sgemm calls on the same operands);
//   - over two micro-batches (B0 B1 W0 W1, as ZB-H1 interleaves them) still bitwise;
//   - independently of the fused code, W's gradients and B's input gradient match central finite
//     differences of L = sum(out * dy) for a few elements of every tensor;
// each without and with LoRA adapters on all four linear layers (B adds their input gradient,
// W their dA and dB).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "brigade/model/gpt_block.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/lora.h"
#include "brigade/tensor/param_spec.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

const GptConfig kCfg{.vocab = 13, .seq_len = 8, .d_model = 16, .n_layer = 1, .n_head = 2};
constexpr int64_t kB = 2;

GptConfig config_for(bool lora) {
  GptConfig c = kCfg;
  if (lora) {
    c.lora_rank = 2;
    c.lora_alpha = 3.0;
    c.lora_targets = kLoraAttn | kLoraAttnProj | kLoraFc | kLoraFcProj;
  }
  return c;
}

struct BlockFixture {
  GptConfig cfg;
  GptShard shard = make_gpt_shard(cfg, 1, 0);
  TpContext tp;
  ParamLayout layout;
  GptParams w;
  std::vector<float> params;
  GptPass pass;
  GptScratch scratch;
  BlockActivations a;
  int64_t BT = kB * kCfg.seq_len, C = kCfg.d_model;
  int64_t matmul_tensors = 8 + (cfg.lora() ? 8 : 0);  // weight and bias; A and B

  explicit BlockFixture(bool lora) : cfg(config_for(lora)) {
    std::vector<ParamGroup> groups;
    w = build_gpt_layout(cfg, shard, layout, groups);
    params.resize(static_cast<size_t>(layout.total()));
    layout.initialize(params.data(), 3);
    // Well away from the 0.02 init and unit gains, so every path carries a sizeable gradient.
    std::vector<float> noise(params.size());
    fill_normal(noise.data(), layout.total(), 0.0f, 0.3f, 4, 5);
    for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
    pass = GptPass{.config = &cfg, .shard = &shard, .tp = &tp, .profiler = nullptr};
    pass.B = kB;
    pass.T = kCfg.seq_len;
    pass.BT = BT;
    pass.rows = BT;
    pass.C = C;
    scratch.allocate(BT, 0, C, shard.fc_local, cfg.lora_rank);
    a.allocate(cfg, shard, kB, BT);
  }
  const GptBlockParams& block() const { return w.blocks[0]; }
  std::vector<float> random(uint64_t key, float std = 1.0f) const {
    std::vector<float> v(static_cast<size_t>(BT * C));
    fill_normal(v.data(), BT * C, 0.0f, std, 9, key);
    return v;
  }
};

// W's operand buffers for one micro-batch, apart from the activations.
struct WeightGradBuffers {
  std::vector<float> dqkv, dattn_proj, dfc, dfc_proj;
  explicit WeightGradBuffers(const BlockFixture& f)
      : dqkv(static_cast<size_t>(f.BT * 3 * f.shard.c_local)),
        dattn_proj(static_cast<size_t>(f.BT * f.C)),
        dfc(static_cast<size_t>(f.BT * f.shard.fc_local)),
        dfc_proj(static_cast<size_t>(f.BT * f.C)) {}
  BlockWeightGrads out() {
    return {.dqkv = dqkv.data(),
            .dattn_proj = dattn_proj.data(),
            .dfc = dfc.data(),
            .dfc_proj = dfc_proj.data()};
  }
  BlockWeightInputs in(const BlockActivations& a) const {
    return {.attn_in = a.attn_in.data(),
            .atty = a.atty.data(),
            .mlp_in = a.mlp_in.data(),
            .fch_gelu = a.fch_gelu.data(),
            .dqkv = dqkv.data(),
            .dattn_proj = dattn_proj.data(),
            .dfc = dfc.data(),
            .dfc_proj = dfc_proj.data()};
  }
};

bool is_matmul_param(const std::string& name) {
  return name.find("c_attn") != std::string::npos || name.find("c_proj") != std::string::npos ||
         name.find("c_fc") != std::string::npos;
}

class GptBlockSplit : public ::testing::TestWithParam<bool> {};

TEST_P(GptBlockSplit, InputPlusWeightEqualsFusedBitwise) {
  BlockFixture f(GetParam());
  const std::vector<float> x = f.random(1), dy = f.random(2);
  const int64_t n = f.layout.total();

  // Fused.
  std::vector<float> g_fused(static_cast<size_t>(n), 0.0f), dx_fused = dy;
  block_forward(f.pass, f.block(), f.params.data(), x.data(), f.a, f.scratch);
  block_backward_mlp(f.pass, f.block(), f.params.data(), g_fused.data(), f.a, dx_fused.data(),
                     f.scratch);
  block_backward_attention(f.pass, f.block(), f.params.data(), g_fused.data(), f.a, x.data(),
                           dx_fused.data(), f.scratch);

  // Split.
  std::vector<float> g(static_cast<size_t>(n), 0.0f), dx = dy;
  WeightGradBuffers buf(f);
  block_forward(f.pass, f.block(), f.params.data(), x.data(), f.a, f.scratch);
  block_backward_input(f.pass, f.block(), f.params.data(), g.data(), f.a, x.data(), dx.data(),
                       buf.out(), f.scratch);
  EXPECT_EQ(dx, dx_fused) << "B's input gradient";
  int untouched = 0;
  for (const ParamSpec& s : f.layout.specs()) {
    if (s.name.rfind("h.0.", 0) != 0) continue;
    const auto begin = g.begin() + s.offset, end = begin + s.numel;
    if (is_matmul_param(s.name)) {
      EXPECT_TRUE(std::all_of(begin, end, [](float v) { return v == 0.0f; }))
          << s.name << " must wait for W";
      ++untouched;
    } else {
      EXPECT_TRUE(std::equal(begin, end, g_fused.begin() + s.offset)) << s.name << " after B";
    }
  }
  EXPECT_EQ(untouched, f.matmul_tensors);  // c_attn, attn.c_proj, c_fc, mlp.c_proj

  block_backward_weight(f.pass, f.block(), f.params.data(), g.data(), buf.in(f.a), f.scratch);
  for (const ParamSpec& s : f.layout.specs()) {
    if (s.name.rfind("h.0.", 0) != 0) continue;
    float max_abs = 0.0f;
    for (int64_t i = 0; i < s.numel; ++i)
      max_abs = std::max(max_abs, std::fabs(g_fused[static_cast<size_t>(s.offset + i)]));
    EXPECT_GT(max_abs, 0.0f) << s.name;
    EXPECT_TRUE(std::equal(g.begin() + s.offset, g.begin() + s.offset + s.numel,
                           g_fused.begin() + s.offset))
        << s.name << " after W";
  }
}

TEST_P(GptBlockSplit, TwoMicroBatchesWithDeferredWeightsEqualFused) {
  BlockFixture f(GetParam());
  const int64_t n = f.layout.total();
  const std::vector<float> x[2] = {f.random(11), f.random(12)};
  const std::vector<float> dy[2] = {f.random(13), f.random(14)};

  std::vector<float> g_fused(static_cast<size_t>(n), 0.0f);
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<float> d = dy[mb];
    block_forward(f.pass, f.block(), f.params.data(), x[mb].data(), f.a, f.scratch);
    block_backward_mlp(f.pass, f.block(), f.params.data(), g_fused.data(), f.a, d.data(),
                       f.scratch);
    block_backward_attention(f.pass, f.block(), f.params.data(), g_fused.data(), f.a, x[mb].data(),
                             d.data(), f.scratch);
  }

  // B0 B1 W0 W1: each micro-batch keeps its own activations and W operands until its W.
  std::vector<float> g(static_cast<size_t>(n), 0.0f);
  BlockActivations acts[2];
  std::vector<WeightGradBuffers> bufs{WeightGradBuffers(f), WeightGradBuffers(f)};
  for (int mb = 0; mb < 2; ++mb) {
    acts[mb].allocate(f.cfg, f.shard, kB, f.BT);
    std::vector<float> d = dy[mb];
    block_forward(f.pass, f.block(), f.params.data(), x[mb].data(), acts[mb], f.scratch);
    block_backward_input(f.pass, f.block(), f.params.data(), g.data(), acts[mb], x[mb].data(),
                         d.data(), bufs[static_cast<size_t>(mb)].out(), f.scratch);
  }
  for (int mb = 0; mb < 2; ++mb)
    block_backward_weight(f.pass, f.block(), f.params.data(), g.data(),
                          bufs[static_cast<size_t>(mb)].in(acts[mb]), f.scratch);
  EXPECT_EQ(g, g_fused);
}

// L(params, x) = sum(block(x) * dy), in double over the float forward.
double block_loss(BlockFixture& f, const std::vector<float>& x, const std::vector<float>& dy) {
  block_forward(f.pass, f.block(), f.params.data(), x.data(), f.a, f.scratch);
  double l = 0.0;
  for (size_t i = 0; i < dy.size(); ++i) l += static_cast<double>(f.a.residual3[i]) * dy[i];
  return l;
}

TEST_P(GptBlockSplit, MatchesFiniteDifferences) {
  BlockFixture f(GetParam());
  std::vector<float> x = f.random(21);
  const std::vector<float> dy = f.random(22);
  std::vector<float> g(static_cast<size_t>(f.layout.total()), 0.0f), dx = dy;
  WeightGradBuffers buf(f);
  block_forward(f.pass, f.block(), f.params.data(), x.data(), f.a, f.scratch);
  block_backward_input(f.pass, f.block(), f.params.data(), g.data(), f.a, x.data(), dx.data(),
                       buf.out(), f.scratch);
  block_backward_weight(f.pass, f.block(), f.params.data(), g.data(), buf.in(f.a), f.scratch);

  // eps 1e-2 on O(1) weights: float rounding of L (~1e-5 relative over 256 outputs) / 2 eps
  // and O(eps^2) truncation stay well inside atol + rtol |g|; a missing or misplaced term is
  // off by O(|g|).
  constexpr float kEps = 1e-2f, kAtol = 2e-2f, kRtol = 2e-2f;
  const auto central = [&](float* v) {
    const float keep = *v;
    *v = keep + kEps;
    const double up = block_loss(f, x, dy);
    *v = keep - kEps;
    const double down = block_loss(f, x, dy);
    *v = keep;
    return (up - down) / (2.0 * kEps);
  };
  int checked = 0;
  for (const ParamSpec& s : f.layout.specs()) {
    if (s.name.rfind("h.0.", 0) != 0) continue;
    for (int64_t i : {int64_t{0}, s.numel / 2 + 1, s.numel - 1}) {
      const double fd = central(&f.params[static_cast<size_t>(s.offset + i)]);
      const double an = g[static_cast<size_t>(s.offset + i)];
      EXPECT_NEAR(an, fd, kAtol + kRtol * std::fabs(fd)) << s.name << "[" << i << "]";
      ++checked;
    }
  }
  for (int64_t i : {int64_t{0}, f.BT * f.C / 2 + 3, f.BT * f.C - 1}) {
    const double fd = central(&x[static_cast<size_t>(i)]);
    EXPECT_NEAR(dx[static_cast<size_t>(i)], fd, kAtol + kRtol * std::fabs(fd)) << "x[" << i << "]";
    ++checked;
  }
  EXPECT_EQ(checked, (4 + f.matmul_tensors) * 3 + 3);  // + the two layernorms' gains and biases
}

INSTANTIATE_TEST_SUITE_P(Adapters, GptBlockSplit, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Lora" : "Plain"; });

}  // namespace
}  // namespace brigade
