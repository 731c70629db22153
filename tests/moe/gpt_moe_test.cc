// A GPT with mixture-of-experts blocks: gradients of the whole model (router and experts
// included) against finite differences, with and without capacity drops; one expert with top-1
// routing against the dense GPT with the same weights (an independent per-token reference: the
// router's softmax over one expert is 1, so the block is the dense MLP); the loss contains the
// load-balancing term; statistics; flops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/gpt.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

GptConfig tiny_moe(int top_k, double capacity_factor, int64_t moe_every = 1) {
  GptConfig c{.vocab = 11, .seq_len = 5, .d_model = 8, .n_layer = 2, .n_head = 2};
  c.n_experts = 4;
  c.moe_top_k = top_k;
  c.capacity_factor = capacity_factor;
  c.aux_loss_coef = 0.1;  // large enough that its router gradient is well above rounding
  c.moe_every = moe_every;
  return c;
}

Batch make_batch(const GptConfig& c, int64_t size, uint64_t seed) {
  Batch b;
  b.size = size;
  const int64_t n = size * c.seq_len;
  for (int64_t i = 0; i <= n; ++i) {
    const auto tok = static_cast<int32_t>(random_uniform(seed, 1, static_cast<uint64_t>(i)) *
                                          static_cast<float>(c.vocab));
    if (i < n) b.tokens.push_back(tok);
    if (i > 0) b.targets.push_back(tok);
  }
  b.targets[1] = -1;
  return b;
}

// Finite differences are valid only where no routing decision (top-k choice, capacity seat)
// flips within +-eps; with eps = 1e-3 and weights perturbed by 0.3 the router logits of these
// seeds are far apart. Float loss rounding ~2e-7 / 2e-3 = 1e-4 stays under atol.
void check_moe_gradients(const GptConfig& c) {
  Gpt model(c, 2);
  model.initialize(1);
  testing::perturb_params(model, 0.3f, 2);
  const Batch batch = make_batch(c, 2, 3);
  const int checked = testing::check_gradients(
      model, batch, {.eps = 1e-3f, .atol = 1e-3f, .rtol = 3e-2f, .per_tensor = 4});
  EXPECT_GE(checked, static_cast<int>(model.layout().specs().size()) * 2);
  // The router carries a real gradient (from the gates and from the aux loss).
  const ParamSpec& router = model.layout().at("h.1.mlp.router.weight");
  double norm = 0;
  for (int64_t i = 0; i < router.numel; ++i)
    norm += std::abs(static_cast<double>(model.grads()[router.offset + i]));
  EXPECT_GT(norm, 1e-3);
}

TEST(GptMoe, Top2DroplessMatchesFiniteDifferences) {
  check_moe_gradients(tiny_moe(2, 0.0));
}

// The check above can see the load-balancing term: it moves router gradients by far more than
// the finite-difference tolerance (so dropping it from backward would fail the check).
TEST(GptMoe, TheAuxTermChangesTheRouterGradientVisibly) {
  GptConfig with = tiny_moe(2, 0.0), without = with;
  without.aux_loss_coef = 0.0;
  Gpt a(with, 2), b(without, 2);
  for (Gpt* m : {&a, &b}) {
    m->initialize(1);
    testing::perturb_params(*m, 0.3f, 2);
    m->zero_grads();
  }
  const Batch batch = make_batch(with, 2, 3);
  a.forward(batch);
  a.backward(batch, 1.0f);
  b.forward(batch);
  b.backward(batch, 1.0f);
  const ParamSpec& r = a.layout().at("h.0.mlp.router.weight");
  double diff = 0;
  for (int64_t i = 0; i < r.numel; ++i)
    diff = std::max(
        diff, static_cast<double>(std::abs(a.grads()[r.offset + i] - b.grads()[r.offset + i])));
  EXPECT_GT(diff, 1e-2);
}

TEST(GptMoe, Top1WithDropsMatchesFiniteDifferences) {
  const GptConfig c = tiny_moe(1, 0.5);
  check_moe_gradients(c);
  // The capacity (ceil(0.5 * 10 / 4) = 2 seats per expert for 10 tokens) really drops.
  Gpt model(c, 2);
  model.initialize(1);
  testing::perturb_params(model, 0.3f, 2);
  const Batch batch = make_batch(c, 2, 3);
  model.forward(batch);
  EXPECT_GT(model.moe_layer(0)->stats().dropped, 0);
}

TEST(GptMoe, EverySecondBlockMatchesFiniteDifferences) {
  GptConfig c = tiny_moe(2, 1.0, 2);
  c.n_layer = 3;
  Gpt model(c, 2);
  EXPECT_EQ(model.moe_layer(0), nullptr);
  EXPECT_NE(model.moe_layer(1), nullptr);
  EXPECT_EQ(model.moe_layer(2), nullptr);
  EXPECT_NO_THROW(model.layout().at("h.0.mlp.c_fc.weight"));
  EXPECT_NO_THROW(model.layout().at("h.1.mlp.experts.3.c_proj.bias"));
  EXPECT_THROW(model.layout().at("h.1.mlp.c_fc.weight"), std::exception);
  check_moe_gradients(c);
}

// Copies the dense model's weights into the one-expert model by name.
void copy_dense_into_moe(const Gpt& dense, Gpt& moe) {
  for (const ParamSpec& s : moe.layout().specs()) {
    std::string name = s.name;
    const std::string experts = "mlp.experts.0.";
    if (const auto at = name.find(experts); at != std::string::npos)
      name = name.substr(0, at) + "mlp." + name.substr(at + experts.size());
    if (name.find("router") != std::string::npos) continue;  // any value: softmax of one is 1
    const ParamSpec& d = dense.layout().at(name);
    ASSERT_EQ(d.numel, s.numel) << name;
    std::copy(dense.params() + d.offset, dense.params() + d.offset + d.numel,
              moe.params() + s.offset);
  }
}

TEST(GptMoe, OneExpertTop1EqualsTheDenseGpt) {
  GptConfig dc{.vocab = 13, .seq_len = 6, .d_model = 8, .n_layer = 2, .n_head = 2};
  GptConfig mc = dc;
  mc.n_experts = 1;
  mc.moe_top_k = 1;
  mc.capacity_factor = 0.0;
  mc.aux_loss_coef = 0.0;
  Gpt dense(dc, 2), moe(mc, 2);
  dense.initialize(4);
  testing::perturb_params(dense, 0.2f, 5);
  moe.initialize(6);
  copy_dense_into_moe(dense, moe);
  const Batch batch = make_batch(dc, 2, 7);
  dense.zero_grads();
  moe.zero_grads();
  const float ld = dense.forward(batch), lm = moe.forward(batch);
  EXPECT_NEAR(lm, ld, 1e-6 * ld);
  dense.backward(batch, 1.0f);
  moe.backward(batch, 1.0f);
  double max_grad = 0;
  for (int64_t i = 0; i < dense.num_params(); ++i)
    max_grad = std::max(max_grad, static_cast<double>(std::abs(dense.grads()[i])));
  for (const ParamSpec& s : moe.layout().specs()) {
    std::string name = s.name;
    if (name.find("router") != std::string::npos) {
      for (int64_t i = 0; i < s.numel; ++i)
        EXPECT_NEAR(moe.grads()[s.offset + i], 0.0f, 1e-6 * max_grad) << name;
      continue;
    }
    const std::string experts = "mlp.experts.0.";
    if (const auto at = name.find(experts); at != std::string::npos)
      name = name.substr(0, at) + "mlp." + name.substr(at + experts.size());
    const ParamSpec& d = dense.layout().at(name);
    for (int64_t i = 0; i < s.numel; ++i)
      ASSERT_NEAR(moe.grads()[s.offset + i], dense.grads()[d.offset + i], 1e-5 * max_grad)
          << s.name << "[" << i << "]";
  }
}

TEST(GptMoe, LossIncludesTheLoadBalancingTermAndStatisticsAreCounted) {
  const GptConfig c = tiny_moe(2, 1.0);
  GptConfig no_aux = c;
  no_aux.aux_loss_coef = 0.0;
  Gpt a(c, 2), b(no_aux, 2);
  a.initialize(8);
  b.initialize(8);  // same names, same seed: same weights
  const Batch batch = make_batch(c, 2, 9);
  const float la = a.forward(batch), lb = b.forward(batch);
  double want_aux = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const MoeStats& s = a.moe_layer(l)->stats();
    EXPECT_EQ(s.tokens, 10);
    EXPECT_EQ(s.assignments, 20);
    int64_t load = 0;
    for (int64_t x : s.load) load += x;
    EXPECT_EQ(load, 20);
    EXPECT_GE(s.aux_loss, 1.0 - 1e-6);  // E sum f P >= 1 with equality only when balanced
    want_aux += c.aux_loss_coef * s.aux_loss;
  }
  EXPECT_NEAR(a.aux_loss(), want_aux, 1e-6);  // each layer returns a float
  EXPECT_NEAR(la - lb, want_aux, 1e-5);
  EXPECT_EQ(b.aux_loss(), 0.0);

  // Statistics are taken at backward (evaluation forwards do not count).
  EXPECT_TRUE(a.take_moe_totals().empty());
  a.backward(batch, 1.0f);
  a.forward(batch);  // an evaluation-like forward
  const MoeTotals t = a.take_moe_totals();
  EXPECT_EQ(t.micro_batches, 1);
  EXPECT_EQ(t.layer_forwards, 2);
  EXPECT_EQ(t.assignments, 40);
  EXPECT_NEAR(t.mean_aux_term(), a.aux_loss(), 1e-12);
  const double drop0 = static_cast<double>(a.moe_layer(0)->stats().dropped);
  const double drop1 = static_cast<double>(a.moe_layer(1)->stats().dropped);
  EXPECT_NEAR(t.dropped_pct(), 100.0 * (drop0 + drop1) / 40.0, 1e-9);
  EXPECT_GE(t.mean_imbalance(), 1.0);
  EXPECT_TRUE(a.take_moe_totals().empty());  // taken
  EXPECT_EQ(a.moe_run_totals().micro_batches, 1);
}

TEST(GptMoe, FlopsCountTopKExperts) {
  GptConfig c{.vocab = 50, .seq_len = 16, .d_model = 32, .n_layer = 4, .n_head = 4};
  c.n_experts = 8;
  c.moe_top_k = 2;
  c.moe_every = 2;  // blocks 1 and 3
  Gpt model(c, 1);
  const double V = 50, T = 16, C = 32, L = 4, E = 8;
  // Per token: 2 dense blocks (12 C^2 + 13 C) and 2 MoE blocks with attention + ln (4 C^2 +
  // 8 C), two experts (8 C^2 + 5 C each) and the router (E C).
  const double n = V * C + 2 * (12 * C * C + 13 * C) +
                   2 * (4 * C * C + 8 * C + 2 * (8 * C * C + 5 * C) + E * C) + 2 * C;
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 6 * n * T + 12 * L * C * T * T);
}

TEST(GptMoe, RejectsTensorParallelAndBadKeys) {
  GptConfig c = tiny_moe(3, 1.0);
  EXPECT_THROW(Gpt(c, 1), ConfigError);
  c = tiny_moe(1, 1.0, 3);  // moe_every > n_layer
  try {
    Gpt m(c, 1);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.moe_every"), std::string::npos) << e.what();
  }
  c = tiny_moe(1, 1.0);
  c.n_experts = -1;
  EXPECT_THROW(Gpt(c, 1), ConfigError);
  // A tp shard: rejected by the layout, naming the key.
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  GptConfig t = tiny_moe(1, 1.0);
  try {
    build_gpt_layout(t, make_gpt_shard(t, 2, 0), layout, groups);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor parallelism"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade
