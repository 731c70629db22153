// Instruction examples: prompt then response then the end separator, cut to T + 1 tokens; the
// targets are -1 on prompt tokens and padding. Checked against a naive construction of the
// sequence, and the GPT's masked loss against a cross-entropy computed by hand from
// Gpt::forward_logits over the response positions only.
#include "brigade/data/instruction_dataset.h"

#include <gtest/gtest.h>

#include <cmath>

#include "brigade/base/error.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/text_corpus.h"
#include "brigade/model/gpt.h"

namespace brigade {
namespace {

constexpr int64_t kT = 16;

// What example k must hold: (inputs, targets) built from the bytes, position by position.
std::pair<std::vector<int32_t>, std::vector<int32_t>> naive_example(const InstructionRecord& r) {
  const std::string s = r.prompt + r.response + std::string(kDocSeparator);
  std::vector<int32_t> in(kT, kInstructionPad), tg(kT, -1);
  for (int64_t t = 0; t < kT; ++t) {
    if (t < static_cast<int64_t>(s.size())) in[t] = static_cast<unsigned char>(s[t]);
    const int64_t next = t + 1;
    if (next < static_cast<int64_t>(s.size()) && next >= static_cast<int64_t>(r.prompt.size())) {
      tg[t] = static_cast<unsigned char>(s[next]);
    }
  }
  return {in, tg};
}

const std::vector<InstructionRecord> kRecords = {
    {"Q: 1+1?\nA: ", "2"},                    // short: padded
    {"Q: capital of France?\nA: ", "Paris"},  // prompt of 26 bytes: no target left
    {"Say hi: ", "hello there, friend"},      // response cut by the context
    {"", "no prompt at all"},                 // every byte after the first is a target
};

TEST(InstructionDataset, ExamplesEqualANaiveConstruction) {
  const ByteTokenizer bytes;
  const InstructionDataset ds(kRecords, bytes, kT, "test records");
  ASSERT_EQ(ds.size(), 4);
  Batch b = ds.make_batch(4);
  const int64_t ids[4] = {0, 1, 2, 3};
  ds.fill(b, ids, 4);
  int64_t total = 0;
  for (int64_t k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    const auto [in, tg] = naive_example(kRecords[static_cast<size_t>(k)]);
    const std::vector<int32_t> got_in(b.tokens.begin() + k * kT, b.tokens.begin() + (k + 1) * kT);
    const std::vector<int32_t> got_tg(b.targets.begin() + k * kT, b.targets.begin() + (k + 1) * kT);
    EXPECT_EQ(got_in, in);
    EXPECT_EQ(got_tg, tg);
    const int64_t valid = std::count_if(tg.begin(), tg.end(), [](int32_t t) { return t >= 0; });
    EXPECT_EQ(ds.valid_targets(k), valid);
    total += valid;
  }
  EXPECT_EQ(ds.valid_targets(0), 1 + 2);  // "2" and "\n\n"
  EXPECT_EQ(ds.valid_targets(1), 0);
  EXPECT_EQ(ds.total_targets(), total);
  EXPECT_EQ(ds.examples_truncated(), 3);  // records 1, 2 and 3 exceed T + 1 = 17 bytes
  EXPECT_EQ(ds.examples_without_targets(), 1);
  EXPECT_TRUE(ds.masks_targets());
}

TEST(InstructionDataset, RefusesDataWithNothingToTrainOn) {
  const ByteTokenizer bytes;
  try {
    InstructionDataset({{std::string(40, 'p'), "r"}}, bytes, kT, "the train split of x.jsonl");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.seq_len = 16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(InstructionDataset({}, bytes, kT, "empty"), ConfigError);
}

// The GPT's loss on masked targets is the mean cross-entropy over the response positions only,
// computed here from the logits in double: log-sum-exp minus the target's logit.
TEST(InstructionDataset, MaskedLossIsTheCrossEntropyOverResponsePositions) {
  const ByteTokenizer bytes;
  const InstructionDataset ds(kRecords, bytes, kT, "test records");
  const GptConfig c{.vocab = 256, .seq_len = kT, .d_model = 32, .n_layer = 2, .n_head = 2};
  Gpt model(c, 4);
  model.initialize(7);
  Batch b = ds.make_batch(4);
  const int64_t ids[4] = {0, 1, 2, 3};
  ds.fill(b, ids, 4);
  const float loss = model.forward(b);

  Batch no_loss = b;
  no_loss.targets.clear();
  const float* logits = model.forward_logits(no_loss);
  double sum = 0;
  int64_t n = 0;
  for (int64_t k = 0; k < 4; ++k) {
    const auto [in, tg] = naive_example(kRecords[static_cast<size_t>(k)]);
    for (int64_t t = 0; t < kT; ++t) {
      if (tg[t] < 0) continue;
      const float* row = logits + (k * kT + t) * c.vocab;
      double mx = row[0];
      for (int64_t v = 1; v < c.vocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double z = 0;
      for (int64_t v = 0; v < c.vocab; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
      sum += mx + std::log(z) - row[tg[t]];
      ++n;
    }
  }
  ASSERT_EQ(n, ds.total_targets());
  EXPECT_NEAR(loss, sum / static_cast<double>(n), 1e-5);
  // Unmasking every position would give another loss: the mask is what the test checks.
  Batch all = b;
  for (int64_t i = 0; i < 4 * kT; ++i) {
    all.targets[i] = i % kT + 1 < kT ? b.tokens[i + 1] : 0;
  }
  EXPECT_GT(std::abs(model.forward(all) - loss), 1e-3);
}

}  // namespace
}  // namespace brigade
