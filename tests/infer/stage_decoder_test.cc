// Pipeline stages of the key-value-cache decoder (model/gpt_decoder.h, infer/stage_weights.h)
// against one decoder over the whole model: the residual stream one stage hands to the next is
// the same floats, so the chained stages' logits equal the whole model's bitwise (EXPECT_EQ on
// every float), at every step of a prefill of slots of different lengths followed by decode
// steps and a restarted slot; for splits [1, 2], [2, 1] and [1, 1, 1] of a 3-block model. Each
// stage holds only its own tensors (checked by name) and caches its own blocks.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/infer/stage_weights.h"
#include "brigade/model/gpt.h"
#include "brigade/model/gpt_decoder.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade::stage_decoder_test {
namespace {

const GptConfig kCfg{.vocab = 13, .seq_len = 12, .d_model = 16, .n_layer = 3, .n_head = 4};

std::vector<int32_t> tokens(uint64_t seed, int64_t n) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) {
    t.push_back(static_cast<int32_t>(random_uniform(seed, 2, static_cast<uint64_t>(i)) *
                                     static_cast<float>(kCfg.vocab)));
  }
  return t;
}

// The stages of `bounds` with the model's weights, each decoding max_slots slots.
struct Pipeline {
  std::vector<std::unique_ptr<StageWeights>> weights;
  std::vector<std::unique_ptr<GptDecoder>> decoders;
  std::vector<std::vector<float>> streams;  // what stage k hands to k + 1

  Pipeline(const Gpt& model, const std::vector<int>& bounds, int64_t slots, int64_t rows) {
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      weights.push_back(
          std::make_unique<StageWeights>(kCfg, bounds[k], bounds[k + 1], TpContext{}));
      StageWeights& w = *weights.back();
      slice_from_full(w.layout(), model.layout(), model.params(), w.params());
      decoders.push_back(std::make_unique<GptDecoder>(w.decoder_weights(), slots, rows));
      streams.emplace_back(static_cast<size_t>(rows * kCfg.d_model));
    }
  }
  const float* step(std::span<const DecodeSegment> segments, const int32_t* toks) {
    const float* in = nullptr;
    const float* logits = nullptr;
    for (size_t k = 0; k < decoders.size(); ++k) {
      logits = decoders[k]->stage_step(segments, k == 0 ? toks : nullptr, in, streams[k].data());
      EXPECT_EQ(logits == nullptr, k + 1 < decoders.size()) << "stage " << k;
      in = streams[k].data();
    }
    return logits;
  }
};

void expect_same(const float* got, const float* want, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << what << " float " << i;
}

TEST(StageDecoder, ChainedStagesEqualTheWholeModelBitwise) {
  Gpt model(kCfg, 1);
  model.initialize(11);
  testing::perturb_params(model, 0.3f, 12);
  for (const std::vector<int>& bounds :
       {std::vector<int>{0, 1, 3}, std::vector<int>{0, 2, 3}, std::vector<int>{0, 1, 2, 3}}) {
    const std::string split = "stages of " + std::to_string(bounds.size() - 1);
    const int64_t slots = 3, rows = slots * kCfg.seq_len;
    GptDecoder whole(model, slots, rows);
    Pipeline pipe(model, bounds, slots, rows);
    // Prefill three slots of 5, 1 and 8 tokens in one step.
    const std::vector<DecodeSegment> pre = {{.slot = 0, .pos = 0, .n = 5},
                                            {.slot = 1, .pos = 0, .n = 1},
                                            {.slot = 2, .pos = 0, .n = 8}};
    const std::vector<int32_t> prompt = tokens(1, 14);
    const float* want = whole.step(pre, prompt.data());
    expect_same(pipe.step(pre, prompt.data()), want, 3 * kCfg.vocab, split + " prefill");
    // Decode: one token per slot per step; slot 1 restarts at step 2 with a 3-token prompt.
    std::vector<int64_t> pos = {5, 1, 8};
    for (int step = 0; step < 4; ++step) {
      std::vector<DecodeSegment> seg;
      std::vector<int32_t> toks = tokens(10 + static_cast<uint64_t>(step), 6);
      for (int64_t s = 0; s < slots; ++s) {
        const bool restart = step == 2 && s == 1;
        const int64_t n = restart ? 3 : 1;
        if (restart) pos[1] = 0;
        seg.push_back({.slot = s, .pos = pos[static_cast<size_t>(s)], .n = n});
        pos[static_cast<size_t>(s)] += n;
      }
      toks.resize(static_cast<size_t>(step == 2 ? 5 : 3));
      want = whole.step(seg, toks.data());
      expect_same(pipe.step(seg, toks.data()), want, slots * kCfg.vocab,
                  split + " step " + std::to_string(step));
    }
    // Each stage holds its blocks' tensors, the embeddings in front and the head behind only.
    for (size_t k = 0; k < pipe.weights.size(); ++k) {
      const ParamLayout& l = pipe.weights[k]->layout();
      const bool first = k == 0, last = k + 1 == pipe.weights.size();
      EXPECT_EQ(l.find("wte.weight") != nullptr, first || last) << split << " stage " << k;
      EXPECT_EQ(l.find("wpe.weight") != nullptr, first) << split << " stage " << k;
      EXPECT_EQ(l.find("ln_f.weight") != nullptr, last) << split << " stage " << k;
      for (int b = 0; b < kCfg.n_layer; ++b) {
        const bool mine = b >= bounds[k] && b < bounds[k + 1];
        EXPECT_EQ(l.find("h." + std::to_string(b) + ".attn.c_attn.weight") != nullptr, mine)
            << split << " stage " << k << " block " << b;
      }
    }
  }
}

TEST(StageDecoder, RefusesAnEmptyOrOutOfRangeStage) {
  EXPECT_THROW(StageWeights(kCfg, 1, 1, TpContext{}), ConfigError);
  EXPECT_THROW(StageWeights(kCfg, 2, 4, TpContext{}), ConfigError);
}

}  // namespace
}  // namespace brigade::stage_decoder_test
