#pragma once
// Incremental GPT forward for generation, with a key-value cache (what vLLM and HF `generate`
// do): each step runs only the new tokens of each sequence through the model, and attention
// reads the keys and values of earlier positions from the cache instead of recomputing them.
// A step is a list of segments, each some new tokens of one sequence (a whole prompt to prefill,
// or the one token just sampled), so prompts of different lengths share a step and a batch.
//
// The arithmetic is the training forward's (the same layernorm, matmul, GELU and tensor-parallel
// entry and exit functions, gpt_sublayer.h) on rows of new tokens instead of whole (B,T) grids;
// only attention differs: a query attends to the cache up to its own position. Logits are
// computed for each segment's last token only. Under tensor parallelism (the model's TpContext,
// without sequence parallelism) every rank caches its own heads, and the vocab-parallel logits
// are gathered so that every rank holds the whole vocabulary and samples alike.
// Mixture-of-experts blocks are not supported (the caller falls back to the full forward).
//
// Pipeline stages (infer/pipeline_decoder.h). A decoder can run one stage's blocks only
// (DecoderWeights): the first stage embeds the tokens, any other starts from the (rows, C)
// residual stream the previous stage computed, and a stage that is not the last hands its own
// residual stream on instead of computing logits. Each stage caches the keys and values of its
// own blocks only. The rows are the same floats the whole model would have between those blocks,
// so a pipeline computes bit for bit what one decoder over every block computes.
#include <cstdint>
#include <span>
#include <vector>

#include "brigade/model/gpt.h"

namespace brigade {

struct DecodeSegment {
  int64_t slot = 0;  // the sequence's cache slot, in [0, max_slots)
  int64_t pos = 0;   // position of the first new token (tokens [0, pos) are cached)
  int64_t n = 0;     // new tokens; pos + n <= seq_len
};

// The tensors a decoder reads (not owned): a whole Gpt's, or one pipeline stage's blocks
// [first_layer, end_layer) with wte and wpe in front on the first stage and ln_f and the tied
// wte behind on the last (infer/stage_weights.h).
struct DecoderWeights {
  const GptConfig* config = nullptr;  // the whole model's
  GptShard shard;                     // this tp rank's
  TpContext tp;                       // without sequence parallelism
  const float* params = nullptr;
  GptParams offsets;  // into params; blocks[j] is block first_layer + j; wte on the first and the
                      // last stage, wpe on the first, ln_f on the last (-1 where absent)
  int first_layer = 0;
  int end_layer = 0;
  bool is_first() const { return first_layer == 0; }
  bool is_last() const { return end_layer == config->n_layer; }
};

// The whole model: every block, both ends.
DecoderWeights decoder_weights(const Gpt& model);

class GptDecoder {
 public:
  // Caches for max_slots sequences of up to the model's seq_len tokens; a step takes at most
  // max_rows new tokens in all. ConfigError for a MoE model. Keeps a reference to the weights.
  GptDecoder(Gpt& model, int64_t max_slots, int64_t max_rows);
  GptDecoder(const DecoderWeights& weights, int64_t max_slots, int64_t max_rows);

  // Collective over the model's tp group (every rank the same segments and tokens). tokens holds
  // the segments' new tokens, concatenated in order. Appends their keys and values to the
  // slots' caches and returns the logits of each segment's last token: (segments, vocab) floats,
  // valid until the next step. A slot is restarted by a segment with pos = 0. Whole model only.
  const float* step(std::span<const DecodeSegment> segments, const int32_t* tokens);

  // One pipeline stage's part of a step, collective over its tp group. The first stage reads
  // tokens (as above), any other reads input, the (rows, C) residual stream entering its first
  // block (rows: the segments' new tokens). A stage that is not the last writes the (rows, C)
  // stream leaving its last block to output and returns null; the last returns the logits.
  const float* stage_step(std::span<const DecodeSegment> segments, const int32_t* tokens,
                          const float* input, float* output);

  const DecoderWeights& weights() const { return w_; }
  int64_t max_slots() const { return max_slots_; }
  int64_t max_rows() const { return max_rows_; }

 private:
  void attention(const DecodeSegment& seg, int64_t row0, int64_t layer);
  float* cache_k(int64_t layer, int64_t slot) { return cache(k_, layer, slot); }
  float* cache_v(int64_t layer, int64_t slot) { return cache(v_, layer, slot); }
  float* cache(std::vector<float>& c, int64_t layer, int64_t slot) {
    return c.data() + ((layer * max_slots_ + slot) * T_) * Cl_;
  }

  DecoderWeights w_;
  TpContext tp_;  // the weights', without sequence parallelism
  int64_t max_slots_, max_rows_;
  int64_t T_, C_, Cl_, NHl_, Fl_, Vl_, V_;
  std::vector<float> k_, v_;  // (stage layers, slots, T, Cl): this rank's heads
  std::vector<float> x_, res2_, res3_, ln_in_, mean_, rstd_, qkv_, atty_, fch_, fch_gelu_;
  std::vector<float> scores_;                     // (T): one query's attention weights
  std::vector<float> last_, lnf_, local_logits_;  // the segments' last rows and their logits
  std::vector<float> gathered_, logits_;          // tp: (tp, S, Vl); (S, V)
  std::vector<int32_t> positions_;                // (rows)
  GptScratch scratch_;
};

}  // namespace brigade
