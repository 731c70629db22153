// GPT gradients against finite differences, gradient accumulation against one large batch,
// the loss at initialisation, and the grad-ready hook's ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "brigade/model/gpt.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

const GptConfig kTiny{.vocab = 11, .seq_len = 5, .d_model = 8, .n_layer = 2, .n_head = 2};

// A batch of random tokens; targets are the next token, as in language modelling.
Batch make_batch(const GptConfig& c, int64_t size, uint64_t seed, bool ignore_one = false) {
  Batch b;
  b.size = size;
  const int64_t n = size * c.seq_len;
  for (int64_t i = 0; i <= n; ++i) {
    const auto tok = static_cast<int32_t>(random_uniform(seed, 1, static_cast<uint64_t>(i)) *
                                          static_cast<float>(c.vocab));
    if (i < n) b.tokens.push_back(tok);
    if (i > 0) b.targets.push_back(tok);
  }
  if (ignore_one) b.targets[1] = -1;
  return b;
}

TEST(GptGrad, MatchesFiniteDifferencesForEveryTensor) {
  Gpt model(kTiny, 2);
  model.initialize(1);
  // Larger than the 0.02 init, so every path (gains, biases, attention softmax) carries a
  // gradient well above float rounding of the loss.
  testing::perturb_params(model, 0.3f, 2);
  const Batch batch = make_batch(kTiny, 2, 3, /*ignore_one=*/true);
  // Float loss: rounding ~1e-7 / (2 eps) = 1e-5 in the difference; O(eps^2) truncation
  // stays below ~5e-4 with these weights. A wrong term would be off by O(|g|).
  const int checked = testing::check_gradients(
      model, batch, {.eps = 1e-2f, .atol = 1e-3f, .rtol = 2e-2f, .per_tensor = 4});
  EXPECT_GE(checked, static_cast<int>(model.layout().specs().size()) * 2);
}

TEST(GptGrad, AccumulationOverTwoHalvesEqualsOneBatch) {
  Gpt model(kTiny, 4);
  model.initialize(5);
  testing::perturb_params(model, 0.1f, 6);
  const Batch full = make_batch(kTiny, 4, 7);
  model.zero_grads();
  model.forward(full);
  model.backward(full, 1.0f);
  const std::vector<float> want(model.grads(), model.grads() + model.num_params());

  model.zero_grads();
  for (int half = 0; half < 2; ++half) {
    Batch b;
    b.size = 2;
    const auto first = full.tokens.begin() + half * 2 * kTiny.seq_len;
    b.tokens.assign(first, first + 2 * kTiny.seq_len);
    const auto tfirst = full.targets.begin() + half * 2 * kTiny.seq_len;
    b.targets.assign(tfirst, tfirst + 2 * kTiny.seq_len);
    model.forward(b);
    model.backward(b, 0.5f);
  }
  double max_grad = 0.0;
  for (float g : want) max_grad = std::max(max_grad, static_cast<double>(std::abs(g)));
  ASSERT_GT(max_grad, 1e-3);
  for (int64_t i = 0; i < model.num_params(); ++i)
    ASSERT_NEAR(model.grads()[i], want[static_cast<size_t>(i)], 1e-5 * max_grad + 1e-7)
        << "element " << i;
}

// Recomputation (train.recompute = "block") keeps only each block's input and re-runs the
// block's forward before its backward: the same operations on the same values, so loss and every
// gradient are bitwise those of the run that kept all activations, for dense and mixture-of-
// experts blocks, over two accumulated micro-batches (one of them shorter than the buffers).
TEST(GptGrad, RecomputedBlocksGiveBitwiseTheSameLossAndGradients) {
  GptConfig moe = kTiny;
  moe.n_layer = 3;
  moe.n_experts = 4;
  moe.moe_top_k = 2;
  moe.moe_every = 2;
  for (const GptConfig& base : {kTiny, moe}) {
    GptConfig recompute = base;
    recompute.recompute_blocks = true;
    Gpt keep(base, 3), again(recompute, 3);
    keep.initialize(9);
    again.initialize(9);
    testing::perturb_params(keep, 0.2f, 10);
    testing::perturb_params(again, 0.2f, 10);
    keep.zero_grads();
    again.zero_grads();
    for (const auto& [size, seed] : {std::pair{3, 11}, std::pair{2, 12}}) {
      const Batch b = make_batch(base, size, static_cast<uint64_t>(seed));
      ASSERT_EQ(keep.forward(b), again.forward(b)) << "n_experts " << base.n_experts;
      keep.backward(b, 0.5f);
      again.backward(b, 0.5f);
    }
    const std::vector<float> want(keep.grads(), keep.grads() + keep.num_params());
    const std::vector<float> got(again.grads(), again.grads() + again.num_params());
    EXPECT_EQ(got, want) << "n_experts " << base.n_experts;
  }
}

TEST(GptGrad, InitialLossIsLogVocab) {
  // With 0.02-scale weights the logits are nearly equal, so the loss is close to uniform.
  const GptConfig c{.vocab = 64, .seq_len = 16, .d_model = 32, .n_layer = 2, .n_head = 4};
  Gpt model(c, 4);
  model.initialize(9);
  const float loss = model.forward(make_batch(c, 4, 10));
  EXPECT_NEAR(loss, std::log(64.0), 0.05);
}

TEST(GptGrad, GradReadyCoversEveryParameterOnceWithEmbeddingsLast) {
  Gpt model(kTiny, 2);
  model.initialize(11);
  const Batch batch = make_batch(kTiny, 2, 12);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<std::vector<float>> at_report;  // the range's gradient when it was reported
  model.set_grad_ready_hook([&](int64_t offset, int64_t count) {
    ranges.emplace_back(offset, count);
    at_report.emplace_back(model.grads() + offset, model.grads() + offset + count);
  });
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);

  ASSERT_FALSE(ranges.empty());
  // A range is final when reported: nothing later in backward changes it.
  for (size_t r = 0; r < ranges.size(); ++r)
    for (int64_t i = 0; i < ranges[r].second; ++i)
      ASSERT_EQ(at_report[r][static_cast<size_t>(i)], model.grads()[ranges[r].first + i])
          << "range " << r << " element " << i;
  // wte (offset 0) is reported by the last call and by no other.
  const ParamSpec& wte = model.layout().at("wte.weight");
  const auto& last = ranges.back();
  EXPECT_LE(last.first, wte.offset);
  EXPECT_GE(last.first + last.second, wte.offset + wte.numel);
  // Sorted by offset, the ranges tile [0, total) with no gap and no overlap.
  auto sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  int64_t next = 0;
  for (const auto& [offset, count] : sorted) {
    EXPECT_EQ(offset, next);
    EXPECT_GT(count, 0);
    next = offset + count;
  }
  EXPECT_EQ(next, model.num_params());
}

TEST(GptGrad, LogitsAreCausal) {
  Gpt model(kTiny, 1);
  model.initialize(13);
  Batch batch = make_batch(kTiny, 1, 14);
  batch.targets.clear();  // generation: no loss
  const int64_t V = kTiny.vocab, T = kTiny.seq_len;
  const float* logits = model.forward_logits(batch);
  const std::vector<float> before(logits, logits + T * V);
  batch.tokens[T - 1] = (batch.tokens[T - 1] + 1) % static_cast<int32_t>(V);
  const float* after = model.forward_logits(batch);
  for (int64_t i = 0; i < (T - 1) * V; ++i) ASSERT_EQ(before[static_cast<size_t>(i)], after[i]);
  bool last_changed = false;
  for (int64_t i = (T - 1) * V; i < T * V; ++i)
    last_changed |= before[static_cast<size_t>(i)] != after[i];
  EXPECT_TRUE(last_changed);
}

TEST(GptGrad, FlopsFollowTheStatedFormula) {
  const GptConfig c{.vocab = 50, .seq_len = 16, .d_model = 32, .n_layer = 3, .n_head = 4};
  Gpt model(c, 1);
  const double V = 50, T = 16, C = 32, L = 3;
  const double n_no_wpe = V * C + L * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 6 * n_no_wpe * T + 12 * L * C * T * T);
}

}  // namespace
}  // namespace brigade
