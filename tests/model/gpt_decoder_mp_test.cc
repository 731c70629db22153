// The key-value-cache decoder (model/gpt_decoder.h) against the full forward it replaces: a
// prompt prefilled in one segment, then tokens decoded one at a time, gives at every step the
// logits the whole-window forward gives at its last position; several slots of different
// lengths in one step give each slot's own logits; a restarted slot forgets its old keys; and
// under tensor parallelism (tp = 2, vocab 13 padded to 14) every rank returns the tp = 1 logits.
// Tolerance: the decoder adds the same products in another order (a matmul over fewer rows, the
// attention's own loops), so logits differ by f32 rounding: |d| <= 1e-4 * max |logit| + 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "brigade/model/gpt.h"
#include "brigade/model/gpt_decoder.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/tensor/rng.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;

const GptConfig kCfg{.vocab = 13, .seq_len = 12, .d_model = 16, .n_layer = 2, .n_head = 4};

std::vector<int32_t> tokens(uint64_t seed, int64_t n) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) {
    t.push_back(static_cast<int32_t>(random_uniform(seed, 2, static_cast<uint64_t>(i)) *
                                     static_cast<float>(kCfg.vocab)));
  }
  return t;
}

// The full forward's logits at the last of `context`'s positions.
std::vector<float> full_logits(Gpt& model, const std::vector<int32_t>& context) {
  Batch b;
  b.size = 1;
  b.seq_len = static_cast<int64_t>(context.size());
  b.tokens = context;
  const float* logits = model.forward_logits(b) + (b.seq_len - 1) * kCfg.vocab;
  return {logits, logits + kCfg.vocab};
}

void expect_close(const float* got, const std::vector<float>& want, const std::string& what) {
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * scale + 1e-6f) << what << " logit " << i;
  }
}

std::unique_ptr<Gpt> reference_model() {
  auto m = std::make_unique<Gpt>(kCfg, 1);
  m->initialize(11);
  testing::perturb_params(*m, 0.3f, 12);  // gains and biases off their defaults
  return m;
}

TEST(GptDecoder, PrefillThenDecodeEqualsTheFullForwardAtEveryStep) {
  std::unique_ptr<Gpt> owned = reference_model();
  Gpt& model = *owned;
  GptDecoder dec(model, 1, kCfg.seq_len);
  const std::vector<int32_t> seq = tokens(5, kCfg.seq_len);
  const int64_t prompt = 5;
  const DecodeSegment pre{.slot = 0, .pos = 0, .n = prompt};
  expect_close(dec.step({&pre, 1}, seq.data()), full_logits(model, {seq.begin(), seq.begin() + 5}),
               "prefill");
  for (int64_t pos = prompt; pos < kCfg.seq_len; ++pos) {
    const DecodeSegment one{.slot = 0, .pos = pos, .n = 1};
    const float* got = dec.step({&one, 1}, &seq[static_cast<size_t>(pos)]);
    expect_close(got, full_logits(model, {seq.begin(), seq.begin() + pos + 1}),
                 "decode at " + std::to_string(pos));
  }
}

TEST(GptDecoder, SlotsOfDifferentLengthsShareAStepAndRestart) {
  std::unique_ptr<Gpt> owned = reference_model();
  Gpt& model = *owned;
  GptDecoder dec(model, 3, 3 * kCfg.seq_len);
  const std::vector<int32_t> a = tokens(21, 7), b = tokens(22, 3), c = tokens(23, 10);
  // Prefill all three in one step: their tokens concatenated.
  std::vector<int32_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  const DecodeSegment pre[3] = {{0, 0, 7}, {1, 0, 3}, {2, 0, 10}};
  const float* logits = dec.step(pre, all.data());
  expect_close(logits, full_logits(model, a), "slot 0");
  expect_close(logits + kCfg.vocab, full_logits(model, b), "slot 1");
  expect_close(logits + 2 * kCfg.vocab, full_logits(model, c), "slot 2");
  // One new token each, at their own positions (slot 1 restarted with another prompt).
  const std::vector<int32_t> b2 = tokens(24, 4);
  const int32_t next[3 + 4] = {1, b2[0], b2[1], b2[2], b2[3], 2, 9};
  const DecodeSegment step[3] = {{0, 7, 1}, {1, 0, 4}, {2, 10, 2}};
  logits = dec.step(step, next);
  std::vector<int32_t> a1 = a, c2 = c;
  a1.push_back(1);
  c2.push_back(2);
  c2.push_back(9);
  expect_close(logits, full_logits(model, a1), "slot 0 decoded");
  expect_close(logits + kCfg.vocab, full_logits(model, b2), "slot 1 restarted");
  expect_close(logits + 2 * kCfg.vocab, full_logits(model, c2), "slot 2 two tokens");
}

TEST(GptDecoder, TensorParallelRanksReturnTheTp1Logits) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(2, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 20000ms, "tp");
    std::unique_ptr<Gpt> owned = reference_model();
    Gpt& ref = *owned;
    const TpContext tp{.comm = comm.get(), .sequence_parallel = true};
    GptConfig cfg = kCfg;
    Gpt m(cfg, 1, tp);
    slice_from_full(m.layout(), ref.layout(), ref.params(), m.params());
    GptDecoder dec(m, 2, 2 * kCfg.seq_len);
    const std::vector<int32_t> a = tokens(31, 6), b = tokens(32, 2);
    std::vector<int32_t> all = a;
    all.insert(all.end(), b.begin(), b.end());
    const DecodeSegment pre[2] = {{0, 0, 6}, {1, 0, 2}};
    const float* logits = dec.step(pre, all.data());
    expect_close(logits, full_logits(ref, a), "tp slot 0");
    expect_close(logits + kCfg.vocab, full_logits(ref, b), "tp slot 1");
    const int32_t next[2] = {4, 7};
    const DecodeSegment step[2] = {{0, 6, 1}, {1, 2, 1}};
    logits = dec.step(step, next);
    std::vector<int32_t> a1 = a, b1 = b;
    a1.push_back(4);
    b1.push_back(7);
    expect_close(logits, full_logits(ref, a1), "tp slot 0 decoded");
    expect_close(logits + kCfg.vocab, full_logits(ref, b1), "tp slot 1 decoded");
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
