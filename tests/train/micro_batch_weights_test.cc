// Masked targets under data parallelism and gradient accumulation: every rank's micro-batches
// weighted by masked_micro_batch_weights, the loss and gradient averaged over the ranks, equal
// one forward/backward of the whole global batch (the mean over all its valid targets), for
// dp = 1, 2, 4 and grad_accum = 1, 2 with the same global batch; and validation (evaluate over
// any number of shards) is the mean over the evaluated targets. The plain 1/grad_accum mean
// of micro-batch means does not (checked, so the weights are what the test tests).
#include "brigade/data/micro_batch_weights.h"

#include <gtest/gtest.h>

#include <cmath>

#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/instruction_dataset.h"
#include "brigade/model/gpt.h"
#include "brigade/train/evaluate.h"

namespace brigade {
namespace {

constexpr int64_t kT = 24;
constexpr int64_t kGlobal = 8;  // examples per step
const GptConfig kGpt{.vocab = 256, .seq_len = kT, .d_model = 16, .n_layer = 1, .n_head = 2};

// Records whose responses have 1 to 14 bytes, so micro-batches hold different target counts.
std::vector<InstructionRecord> records() {
  std::vector<InstructionRecord> out;
  for (int i = 0; i < 40; ++i) {
    std::string prompt = "Q";  // appended piecewise: GCC 12 warns on "Q" + std::to_string(i)
    prompt += std::to_string(i);
    prompt += ": ";
    out.push_back({prompt, std::string(1 + (i * 7) % 14, static_cast<char>('a' + i % 26))});
  }
  return out;
}

struct StepResult {
  double loss = 0;
  std::vector<float> grads;
};

// dp ranks simulated in one process: each rank's micro-batches forward + backward with its
// weights into its own gradient, then the ranks' losses and gradients averaged (DDP's kAvg).
StepResult simulated_step(const InstructionDataset& ds, int64_t dp, int64_t accum, int64_t step,
                          bool weighted) {
  const int64_t mb = kGlobal / (dp * accum);
  StepResult out;
  for (int64_t r = 0; r < dp; ++r) {
    Gpt model(kGpt, mb);
    model.initialize(3);
    model.zero_grads();
    Sampler sampler(SamplerOptions{.num_examples = ds.size(),
                                   .seed = 11,
                                   .micro_batch = mb,
                                   .grad_accum = accum,
                                   .dp_size = dp,
                                   .dp_rank = r});
    std::vector<float> w(static_cast<size_t>(accum), 1.0f / static_cast<float>(accum));
    if (weighted) masked_micro_batch_weights(ds, sampler, step, true, w.data());
    Batch b = ds.make_batch(mb);
    std::vector<int64_t> ids(static_cast<size_t>(mb));
    for (int64_t j = 0; j < accum; ++j) {
      sampler.micro_batch_examples(step, j, ids.data());
      ds.fill(b, ids.data(), mb);
      out.loss += model.forward(b) * w[static_cast<size_t>(j)] / static_cast<double>(dp);
      model.backward(b, w[static_cast<size_t>(j)]);
    }
    out.grads.resize(static_cast<size_t>(model.num_params()));
    for (int64_t i = 0; i < model.num_params(); ++i) {
      out.grads[static_cast<size_t>(i)] += model.grads()[i] / static_cast<float>(dp);
    }
  }
  return out;
}

// The reference: the global batch in one forward and backward.
StepResult whole_batch(const InstructionDataset& ds, int64_t step) {
  return simulated_step(ds, 1, 1, step, false);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

TEST(MicroBatchWeights, AnySplitOfTheGlobalBatchEqualsTheWholeBatch) {
  const ByteTokenizer bytes;
  const InstructionDataset ds(records(), bytes, kT, "records");
  for (int64_t step : {0, 3}) {
    const StepResult ref = whole_batch(ds, step);
    double plain_gap = 0;
    for (int64_t dp : {1, 2, 4}) {
      for (int64_t accum : {1, 2}) {
        if (kGlobal % (dp * accum) != 0) continue;
        SCOPED_TRACE(::testing::Message() << "step " << step << " dp " << dp << " accum " << accum);
        const StepResult got = simulated_step(ds, dp, accum, step, true);
        EXPECT_NEAR(got.loss, ref.loss, 1e-5);
        EXPECT_LT(max_abs_diff(got.grads, ref.grads), 1e-6);
        const StepResult plain = simulated_step(ds, dp, accum, step, false);
        plain_gap = std::max(plain_gap, std::abs(plain.loss - ref.loss));
      }
    }
    EXPECT_GT(plain_gap, 1e-3) << "the unweighted mean should differ on masked data";
  }
}

// Weights sum to dp over the ranks (to 1 per rank on average) and follow the valid targets.
TEST(MicroBatchWeights, WeightsAreTargetSharesTimesRanks) {
  const ByteTokenizer bytes;
  const InstructionDataset ds(records(), bytes, kT, "records");
  const int64_t dp = 2, accum = 2, mb = 2;
  double sum = 0;
  for (int64_t r = 0; r < dp; ++r) {
    Sampler s(SamplerOptions{.num_examples = ds.size(),
                             .seed = 1,
                             .micro_batch = mb,
                             .grad_accum = accum,
                             .dp_size = dp,
                             .dp_rank = r});
    float w[2];
    masked_micro_batch_weights(ds, s, 5, true, w);
    sum += w[0] + w[1];
    float local[2];
    masked_micro_batch_weights(ds, s, 5, false, local);
    EXPECT_NEAR(local[0] + local[1], 1.0, 1e-6);
  }
  EXPECT_NEAR(sum, static_cast<double>(dp), 1e-5);
}

// Validation over masked data: micro-batches of 3 (the last one partial) split over 1, 2 or 3
// shards, summed, give the mean over every valid target of the set, as one forward of all of it.
TEST(MicroBatchWeights, EvaluationIsTheMeanOverValidationTargets) {
  const ByteTokenizer bytes;
  std::vector<InstructionRecord> recs = records();
  recs.resize(8);
  const InstructionDataset ds(recs, bytes, kT, "records");
  Gpt whole(kGpt, 8);
  whole.initialize(3);
  Batch all = ds.make_batch(8);
  std::vector<int64_t> ids(8);
  for (int64_t i = 0; i < 8; ++i) ids[static_cast<size_t>(i)] = i;
  ds.fill(all, ids.data(), 8);
  const double want = whole.forward(all);
  Gpt model(kGpt, 3);
  model.initialize(3);
  Batch b = ds.make_batch(3);
  double by_examples = 0;
  for (int64_t shards : {1, 2, 3}) {
    EvalSums sum;
    for (int64_t s = 0; s < shards; ++s) {
      const EvalSums part = evaluate(model, ds, b, 3, 0, s, shards);
      sum.loss_sum += part.loss_sum;
      sum.examples += part.examples;
      sum.weight += part.weight;
    }
    EXPECT_EQ(sum.examples, 8);
    EXPECT_EQ(sum.weight, static_cast<double>(ds.total_targets()));
    EXPECT_NEAR(sum.loss(), want, 1e-5) << shards << " shards";
  }
  // The mean of batch means weighted by examples is another number on this data.
  for (int64_t k = 0; k < 3; ++k) {
    const int64_t n = std::min<int64_t>(3, 8 - 3 * k);
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = 3 * k + i;
    ds.fill(b, ids.data(), n);
    by_examples += model.forward(b) * static_cast<double>(n) / 8.0;
  }
  EXPECT_GT(std::abs(by_examples - want), 1e-4);
}

}  // namespace
}  // namespace brigade
