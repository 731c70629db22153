#pragma once
// The two ends of the GPT: the token + position embedding (first pipeline stage) and ln_f, the
// unembedding tied to wte and the softmax cross-entropy (last stage). Under tensor parallelism
// wte is vocab-parallel (rows [v0, v0 + Vl) of the padded vocab, kernels/cpu/vocab_parallel.h):
// the embedding looks up the rank's rows and sums over ranks (Megatron's g, or a reduce-scatter
// onto sequence shards), the head computes this rank's vocab columns of the logits, and the
// cross-entropy all-reduces a max and two sums per row instead of gathering the logits.
#include <cstdint>
#include <vector>

#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_sublayer.h"

namespace brigade {

// What the head saves for backward.
struct HeadActivations {
  std::vector<float> lnf_mean, lnf_rstd;  // (rows)
  std::vector<float> lnf;                 // (BT,C): ln_f output (gathered under SP)
  std::vector<float> logits;              // (BT,Vl); dlogits after backward
  std::vector<float> losses, lse;         // (BT)
  std::vector<float> ce_max, ce_sums;     // (BT), (2,BT): vocab-parallel reductions
  void allocate(const GptConfig& config, const GptShard& shard, int64_t max_batch,
                int64_t max_rows);
};

// out (rows,C) = wte[tokens] + wpe[positions] for this rank's rows of the (B,T) grid.
void embedding_forward(const GptPass& pass, const GptParams& w, const float* params,
                       const int32_t* tokens, float* out, GptScratch& s);
// Accumulates wte (this rank's rows) and wpe gradients from dres (rows,C), the gradient of out.
void embedding_backward(const GptPass& pass, const GptParams& w, float* grads,
                        const int32_t* tokens, const float* dres, GptScratch& s);

// h.logits (BT,Vl) = ln_f(x) @ wte_shard^T; x (rows,C) is the last block's output.
void head_forward(const GptPass& pass, const GptParams& w, const float* params, const float* x,
                  HeadActivations& h, GptScratch& s);

// Per-row losses of h.logits against targets (BT; < 0 ignored) into h.losses; the same on
// every tp rank.
void loss_forward(const GptPass& pass, HeadActivations& h, const int32_t* targets);

// From the per-row loss gradient dloss, overwrites h.logits with dlogits, accumulates the
// gradients of wte (this rank's rows) and ln_f, and writes dres (rows,C), the gradient of x.
void head_backward(const GptPass& pass, const GptParams& w, const float* params, float* grads,
                   const float* x, const int32_t* targets, float dloss, HeadActivations& h,
                   float* dres, GptScratch& s);

}  // namespace brigade
