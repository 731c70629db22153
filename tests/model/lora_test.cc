// LoRA adapters (model/lora.h): the analytic parameter count, gradients against finite
// differences, the adapted model at initialisation equal to the base model bitwise, the grad-ready
// ranges still covering each half of a block, and the merged base model (model/lora_merge.h)
// computing the adapted model's loss.
#include "brigade/model/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/gpt.h"
#include "brigade/model/lora_merge.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade::lora_test {
namespace {

const GptConfig kBase{.vocab = 11, .seq_len = 5, .d_model = 8, .n_layer = 2, .n_head = 2};

GptConfig with_lora(int64_t rank, unsigned targets, double alpha = 16.0) {
  GptConfig c = kBase;
  c.lora_rank = rank;
  c.lora_alpha = alpha;
  c.lora_targets = targets;
  return c;
}

constexpr unsigned kAll = kLoraAttn | kLoraAttnProj | kLoraFc | kLoraFcProj;

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
  return b;
}

// Sets every lora_B to random values (at initialisation they are zero, which would hide
// mistakes in A's gradient and in the forward term).
void randomise_lora_b(Gpt& model, uint64_t seed) {
  for (const ParamSpec& s : model.layout().specs()) {
    if (s.name.find(".lora_B.") == std::string::npos) continue;
    fill_normal(model.params() + s.offset, s.numel, 0.0f, 0.3f, seed, hash_name(s.name));
  }
}

TEST(Lora, ParameterCountIsRankTimesInPlusOutPerTarget) {
  const int64_t C = kBase.d_model, L = kBase.n_layer;
  const int64_t base = Gpt(kBase, 1).num_params();
  // (in, out) of c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
  const std::vector<std::pair<unsigned, int64_t>> sides = {{kLoraAttn, C + 3 * C},
                                                           {kLoraAttnProj, C + C},
                                                           {kLoraFc, C + 4 * C},
                                                           {kLoraFcProj, 4 * C + C}};
  for (int64_t r : {1, 2, 4}) {
    for (unsigned targets : {kLoraAttn, kLoraAttn | kLoraFc, kLoraAttnProj | kLoraFcProj, kAll}) {
      int64_t want = 0;
      for (const auto& [bit, in_plus_out] : sides)
        if (targets & bit) want += r * in_plus_out;
      const Gpt model(with_lora(r, targets), 1);
      EXPECT_EQ(model.num_params() - base, L * want) << "rank " << r << " targets " << targets;
      int64_t adapters = 0;
      for (const ParamSpec& s : model.layout().specs())
        if (is_lora_tensor(s.name)) adapters += s.numel;
      EXPECT_EQ(adapters, L * want);
    }
  }
  const Gpt model(with_lora(2, kAll), 1);
  EXPECT_EQ(model.layout().at("h.1.attn.c_attn.lora_A.weight").shape, (std::vector<int64_t>{2, C}));
  EXPECT_EQ(model.layout().at("h.1.attn.c_attn.lora_B.weight").shape,
            (std::vector<int64_t>{3 * C, 2}));
  EXPECT_EQ(model.layout().at("h.0.mlp.c_proj.lora_A.weight").shape,
            (std::vector<int64_t>{2, 4 * C}));
}

TEST(Lora, GradientsMatchFiniteDifferences) {
  Gpt model(with_lora(2, kAll, 4.0), 2);
  model.initialize(1);
  testing::perturb_params(model, 0.3f, 2);
  randomise_lora_b(model, 3);
  const Batch batch = make_batch(model.config(), 2, 4);
  const int checked = testing::check_gradients(
      model, batch, {.eps = 1e-2f, .atol = 1e-3f, .rtol = 2e-2f, .per_tensor = 4});
  EXPECT_GE(checked, static_cast<int>(model.layout().specs().size()) * 2);
}

TEST(Lora, AtInitialisationTheModelIsTheBaseModelBitwise) {
  Gpt base(kBase, 2);
  base.initialize(7);
  Gpt lora(with_lora(4, kAll), 2);
  lora.initialize(7);
  // Base tensors are initialised by name: the same values in both models.
  for (const ParamSpec& s : base.layout().specs()) {
    const ParamSpec& t = lora.layout().at(s.name);
    ASSERT_TRUE(std::equal(base.params() + s.offset, base.params() + s.offset + s.numel,
                           lora.params() + t.offset))
        << s.name;
  }
  // lora_A is PEFT's Kaiming-uniform: nonzero, within 1/sqrt(in); lora_B zero.
  const ParamSpec& a = lora.layout().at("h.0.mlp.c_proj.lora_A.weight");
  float max_a = 0;
  for (int64_t i = 0; i < a.numel; ++i)
    max_a = std::max(max_a, std::abs(lora.params()[a.offset + i]));
  EXPECT_GT(max_a, 0.0f);
  EXPECT_LE(max_a, 1.0f / std::sqrt(static_cast<float>(4 * kBase.d_model)));
  const Batch batch = make_batch(kBase, 2, 8);
  EXPECT_EQ(base.forward(batch), lora.forward(batch));  // bitwise
  const int64_t logits = 2 * kBase.seq_len * kBase.vocab;
  EXPECT_TRUE(std::equal(base.logits(), base.logits() + logits, lora.logits()));
}

TEST(Lora, GradReadyRangesCoverEachHalfOfABlockOnce) {
  Gpt model(with_lora(2, kAll), 2);
  model.initialize(1);
  randomise_lora_b(model, 2);
  std::vector<std::pair<int64_t, int64_t>> ready;
  const Batch batch = make_batch(model.config(), 2, 3);
  model.zero_grads();
  model.forward(batch);
  // Each range's gradients must be final when reported: snapshot them and compare at the end.
  std::vector<std::vector<float>> at_report;
  model.set_grad_ready_hook([&](int64_t offset, int64_t count) {
    ready.emplace_back(offset, count);
    at_report.emplace_back(model.grads() + offset, model.grads() + offset + count);
  });
  model.backward(batch, 1.0f);
  int64_t covered = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    covered += ready[i].second;
    EXPECT_TRUE(
        std::equal(at_report[i].begin(), at_report[i].end(), model.grads() + ready[i].first))
        << "range at " << ready[i].first << " changed after it was reported";
  }
  EXPECT_EQ(covered, model.num_params());
  // The adapters trained: their gradients are not zero.
  const ParamSpec& a = model.layout().at("h.0.attn.c_attn.lora_A.weight");
  double sum = 0;
  for (int64_t i = 0; i < a.numel; ++i) sum += std::abs(model.grads()[a.offset + i]);
  EXPECT_GT(sum, 0.0);
}

TEST(Lora, TheMergedBaseModelGivesTheAdaptedModelsLoss) {
  for (unsigned targets : {kLoraAttn, kAll}) {
    Gpt lora(with_lora(3, targets, 8.0), 2);
    lora.initialize(11);
    randomise_lora_b(lora, 12);
    Gpt base(without_lora(lora.config()), 2);
    merge_lora_into_base(lora.config(), lora.layout(), lora.params(), base.layout(), base.params());
    const Batch batch = make_batch(kBase, 2, 13);
    const float want = lora.forward(batch);
    const float got = base.forward(batch);
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << targets;
    // The adapters changed the function: the unmerged base weights give another loss.
    Gpt plain(kBase, 2);
    plain.initialize(11);
    EXPECT_GT(std::abs(plain.forward(batch) - want), 1e-3) << targets;
  }
}

TEST(Lora, BadSettingsAreConfigErrors) {
  EXPECT_THROW(Gpt(with_lora(2, 0), 1), ConfigError);                          // no targets
  EXPECT_THROW(Gpt(with_lora(kBase.d_model + 1, kLoraAttn), 1), ConfigError);  // rank > C
  GptConfig moe = with_lora(2, kLoraAttn);
  moe.n_experts = 2;
  EXPECT_THROW(Gpt(moe, 1), ConfigError);
  EXPECT_EQ(parse_lora_targets({"attn.c_attn", "mlp.c_proj"}), kLoraAttn | kLoraFcProj);
  try {
    parse_lora_targets({"attn.c_atn"});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("lora.targets = \"attn.c_atn\""), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("\"mlp.c_fc\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_lora_targets({"mlp.c_fc", "mlp.c_fc"}), ConfigError);
}

}  // namespace
}  // namespace brigade::lora_test
