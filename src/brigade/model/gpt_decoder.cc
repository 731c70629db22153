#include "brigade/model/gpt_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/vocab_parallel.h"
#include "brigade/model/tp/tp_comm.h"

namespace brigade {

DecoderWeights decoder_weights(const Gpt& model) {
  return {.config = &model.config(),
          .shard = model.shard(),
          .tp = model.tp(),
          .params = model.params(),
          .offsets = model.offsets(),
          .first_layer = 0,
          .end_layer = static_cast<int>(model.config().n_layer)};
}

GptDecoder::GptDecoder(Gpt& model, int64_t max_slots, int64_t max_rows)
    : GptDecoder(decoder_weights(model), max_slots, max_rows) {}

GptDecoder::GptDecoder(const DecoderWeights& weights, int64_t max_slots, int64_t max_rows)
    : w_(weights), tp_(weights.tp), max_slots_(max_slots), max_rows_(max_rows) {
  const GptConfig& c = *w_.config;
  if (c.n_experts > 0) {
    throw ConfigError(fmt::format(
        "model.n_experts = {}: generation with the key-value cache does not run mixture-of-experts "
        "blocks yet (generate with --no-kv-cache)",
        c.n_experts));
  }
  // Adapters are merged into the base weights before generation (infer/checkpoint_model.h).
  BRIGADE_CHECK(!c.lora()) << "the decoder runs plain weights: merge LoRA adapters first";
  BRIGADE_CHECK(max_slots >= 1 && max_rows >= 1) << "decoder of " << max_slots << " slots";
  BRIGADE_CHECK(w_.first_layer >= 0 && w_.first_layer < w_.end_layer && w_.end_layer <= c.n_layer &&
                static_cast<int64_t>(w_.offsets.blocks.size()) == w_.end_layer - w_.first_layer)
      << "decoder over blocks [" << w_.first_layer << ", " << w_.end_layer << ") with "
      << w_.offsets.blocks.size() << " block offsets";
  tp_.sequence_parallel = false;  // every rank holds every new row
  const GptShard& sh = w_.shard;
  T_ = c.seq_len;
  C_ = c.d_model;
  Cl_ = sh.c_local;
  NHl_ = sh.heads_local;
  Fl_ = sh.fc_local;
  Vl_ = sh.vocab_local;
  V_ = c.vocab;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const int64_t layers = w_.end_layer - w_.first_layer;
  k_.resize(sz(layers * max_slots * T_ * Cl_));
  v_.resize(k_.size());
  for (auto* b : {&x_, &res2_, &res3_, &ln_in_}) b->resize(sz(max_rows * C_));
  mean_.resize(sz(max_rows));
  rstd_.resize(sz(max_rows));
  qkv_.resize(sz(max_rows * 3 * Cl_));
  atty_.resize(sz(max_rows * Cl_));
  fch_.resize(sz(max_rows * Fl_));
  fch_gelu_.resize(sz(max_rows * Fl_));
  scores_.resize(sz(T_));
  positions_.resize(sz(max_rows));
  if (w_.is_last()) {
    // A step has at most one segment per slot.
    const int64_t max_segments = max_slots;
    last_.resize(sz(max_segments * C_));
    lnf_.resize(sz(max_segments * C_));
    local_logits_.resize(sz(max_segments * Vl_));
    gathered_.resize(sz(max_segments * Vl_ * tp_.size()));
    logits_.resize(sz(max_segments * V_));
  }
  scratch_.allocate(max_rows, max_rows, C_, Fl_);
}

// One segment's new rows attend to their slot's cache up to their own positions (the cache
// already holds this step's keys and values).
void GptDecoder::attention(const DecodeSegment& seg, int64_t row0, int64_t layer) {
  const int64_t hs = C_ / w_.config->n_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* K = cache_k(layer, seg.slot);
  const float* V = cache_v(layer, seg.slot);
  for (int64_t i = 0; i < seg.n; ++i) {
    const int64_t row = row0 + i, pos = seg.pos + i;
    for (int64_t h = 0; h < NHl_; ++h) {
      const float* q = qkv_.data() + row * 3 * Cl_ + h * hs;
      float max_score = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        const float* k = K + t * Cl_ + h * hs;
        float dot = 0.0f;
        for (int64_t d = 0; d < hs; ++d) dot += q[d] * k[d];
        scores_[static_cast<size_t>(t)] = dot * scale;
        max_score = std::max(max_score, dot * scale);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t <= pos; ++t) {
        float& s = scores_[static_cast<size_t>(t)];
        s = std::exp(s - max_score);
        sum += s;
      }
      float* out = atty_.data() + row * Cl_ + h * hs;
      std::fill(out, out + hs, 0.0f);
      const float inv = 1.0f / sum;
      for (int64_t t = 0; t <= pos; ++t) {
        const float w = scores_[static_cast<size_t>(t)] * inv;
        const float* v = V + t * Cl_ + h * hs;
        for (int64_t d = 0; d < hs; ++d) out[d] += w * v[d];
      }
    }
  }
}

const float* GptDecoder::step(std::span<const DecodeSegment> segments, const int32_t* tokens) {
  BRIGADE_CHECK(w_.is_first() && w_.is_last())
      << "step() runs the whole model; a stage of blocks [" << w_.first_layer << ", "
      << w_.end_layer << ") runs stage_step()";
  return stage_step(segments, tokens, nullptr, nullptr);
}

const float* GptDecoder::stage_step(std::span<const DecodeSegment> segments, const int32_t* tokens,
                                    const float* input, float* output) {
  BRIGADE_CHECK(w_.is_first() ? tokens != nullptr : input != nullptr)
      << "stage [" << w_.first_layer << ", " << w_.end_layer << ") without its input";
  BRIGADE_CHECK(w_.is_last() || output != nullptr)
      << "stage [" << w_.first_layer << ", " << w_.end_layer << ") without an output";
  int64_t R = 0;
  for (const DecodeSegment& s : segments) {
    BRIGADE_CHECK(s.slot >= 0 && s.slot < max_slots_ && s.n >= 1 && s.pos >= 0 && s.pos + s.n <= T_)
        << "segment slot " << s.slot << " pos " << s.pos << " n " << s.n;
    for (int64_t i = 0; i < s.n; ++i) positions_[static_cast<size_t>(R + i)] = s.pos + i;
    R += s.n;
  }
  const auto S = static_cast<int64_t>(segments.size());
  BRIGADE_CHECK(R <= max_rows_ && S <= max_slots_) << R << " rows in " << S << " segments";
  const GptConfig& c = *w_.config;
  const GptShard& sh = w_.shard;
  const GptParams& w = w_.offsets;
  const float* p = w_.params;
  const GptPass pass{.config = &c,
                     .shard = &sh,
                     .tp = &tp_,
                     .profiler = nullptr,
                     .B = 1,
                     .T = R,
                     .BT = R,
                     .rows = R,
                     .row0 = 0,
                     .C = C_};

  if (w_.is_first()) {
    // Embedding: this rank's wte rows (all of them at tp = 1), summed over ranks, then wpe at
    // each row's own position.
    vocab_parallel_embedding_forward(x_.data(), tokens, p + w.wte, R, C_, sh.vocab_begin, Vl_);
    reduce_from_tp_forward(tp_, x_.data(), R * C_);
    for (int64_t r = 0; r < R; ++r) {
      const float* pe = p + w.wpe + positions_[static_cast<size_t>(r)] * C_;
      float* x = x_.data() + r * C_;
      for (int64_t i = 0; i < C_; ++i) x[i] += pe[i];
    }
  } else {
    std::copy(input, input + R * C_, x_.data());
  }

  float* x = x_.data();
  const auto layers = static_cast<int64_t>(w.blocks.size());
  for (int64_t l = 0; l < layers; ++l) {  // l: the stage's own block index (its cache's layer)
    const GptBlockParams& b = w.blocks[static_cast<size_t>(l)];
    norm_enter_forward(pass, ln_in_.data(), mean_.data(), rstd_.data(), x, p + b.ln1_w, p + b.ln1_b,
                       scratch_);
    matmul_forward(qkv_.data(), ln_in_.data(), p + b.attn_w, p + b.attn_b, R, C_, 3 * Cl_);
    int64_t row0 = 0;
    for (const DecodeSegment& s : segments) {
      // This rank's qkv row is [q | k | v] of its own heads; cache k and v.
      for (int64_t i = 0; i < s.n; ++i) {
        const float* row = qkv_.data() + (row0 + i) * 3 * Cl_;
        std::copy(row + Cl_, row + 2 * Cl_, cache_k(l, s.slot) + (s.pos + i) * Cl_);
        std::copy(row + 2 * Cl_, row + 3 * Cl_, cache_v(l, s.slot) + (s.pos + i) * Cl_);
      }
      attention(s, row0, l);
      row0 += s.n;
    }
    row_parallel_exit_forward(pass, res2_.data(), x, atty_.data(), p + b.attn_proj_w,
                              p + b.attn_proj_b, Cl_, scratch_);
    norm_enter_forward(pass, ln_in_.data(), mean_.data(), rstd_.data(), res2_.data(), p + b.ln2_w,
                       p + b.ln2_b, scratch_);
    matmul_forward(fch_.data(), ln_in_.data(), p + b.fc_w, p + b.fc_b, R, C_, Fl_);
    gelu_forward(fch_gelu_.data(), fch_.data(), R * Fl_);
    row_parallel_exit_forward(pass, res3_.data(), res2_.data(), fch_gelu_.data(), p + b.fc_proj_w,
                              p + b.fc_proj_b, Fl_, scratch_);
    std::swap(x_, res3_);
    x = x_.data();
  }

  if (!w_.is_last()) {
    std::copy(x, x + R * C_, output);
    return nullptr;
  }
  // Head on each segment's last row only.
  int64_t row_end = 0;
  for (int64_t k = 0; k < S; ++k) {
    row_end += segments[static_cast<size_t>(k)].n;
    std::copy(x + (row_end - 1) * C_, x + row_end * C_, last_.data() + k * C_);
  }
  layernorm_forward(lnf_.data(), mean_.data(), rstd_.data(), last_.data(), p + w.lnf_w, p + w.lnf_b,
                    S, C_);
  matmul_forward(local_logits_.data(), lnf_.data(), p + w.wte, nullptr, S, C_, Vl_);
  if (!tp_.active()) return local_logits_.data();  // Vl = V at tp = 1
  // Rank j holds columns [j Vl, (j + 1) Vl) of the padded vocabulary for every segment.
  tp_.comm->all_gather(local_logits_.data(), gathered_.data(), S * Vl_);
  for (int64_t k = 0; k < S; ++k) {
    for (int64_t j = 0; j < tp_.size(); ++j) {
      const int64_t begin = j * Vl_, n = std::min(Vl_, V_ - begin);
      if (n <= 0) break;
      const float* src = gathered_.data() + (j * S + k) * Vl_;
      std::copy(src, src + n, logits_.data() + k * V_ + begin);
    }
  }
  return logits_.data();
}

}  // namespace brigade
