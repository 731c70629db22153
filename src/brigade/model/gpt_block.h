#pragma once
// One GPT-2 block, x -> x + attn(ln_1(x)) -> (+ mlp(ln_2(.))), as two sublayers built from
// gpt_sublayer.h, tensor-parallel when the pass's TpContext is: c_attn and mlp.c_fc are
// column-parallel (this rank's heads, this rank's 4C/tp features), attn.c_proj and mlp.c_proj
// row-parallel. A mixture-of-experts block (GptBlockParams::is_moe) runs its MLP through a
// MoeLayer instead, which holds that layer's routing for one micro-batch (so the caller keeps one
// per MoE block and runs one forward before each backward; tp = 1 only). A dense block owns no
// state; its activations for one micro-batch live in a BlockActivations, so a caller (the whole
// model, or a pipeline stage holding a range of blocks and several micro-batches in flight) decides
// how many sets to keep.
#include <cstdint>
#include <vector>

#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_sublayer.h"

namespace brigade {

class MoeLayer;  // model/moe/moe_layer.h

// What one block saves for backward. Shapes with Cl = C/tp, NHl = NH/tp, 4Cl = 4C/tp.
struct BlockActivations {
  std::vector<float> ln1_mean, ln1_rstd;  // (rows)
  std::vector<float> attn_in;             // (BT,C): ln_1 output (gathered under SP)
  std::vector<float> qkv;                 // (BT,3Cl): this rank's q, k, v heads
  std::vector<float> atty;                // (BT,Cl): attention output before c_proj
  std::vector<float> lse;                 // (B,NHl,T)
  std::vector<float> residual2;           // (rows,C): after the attention residual
  std::vector<float> ln2_mean, ln2_rstd;  // (rows)
  std::vector<float> mlp_in;              // (BT,C): ln_2 output (gathered under SP)
  std::vector<float> fch, fch_gelu;       // (BT,4Cl); empty in a MoE block
  std::vector<float> residual3;           // (rows,C): the block output

  // Sizes every buffer for max_batch sequences of T tokens and max_rows residual rows
  // (without the dense MLP's fch buffers when dense_mlp is false).
  void allocate(const GptConfig& config, const GptShard& shard, int64_t max_batch, int64_t max_rows,
                bool dense_mlp = true);
};

// x (rows,C) is the block input; the output is a.residual3. moe is the block's layer when
// w.is_moe (else null). Returns the MoE load-balancing term to add to the loss (0 when dense).
float block_forward(const GptPass& pass, const GptBlockParams& w, const float* params,
                    const float* x, BlockActivations& a, GptScratch& s, MoeLayer* moe = nullptr);

// Backward of the MLP half: dres (rows,C) holds the gradient of residual3 and becomes that of
// residual2. Accumulates the gradients of [ln_2 .. mlp.c_proj] (or of the router and experts)
// into grads. A MoE block needs its layer and loss_scale = d loss / d (its returned term).
void block_backward_mlp(const GptPass& pass, const GptBlockParams& w, const float* params,
                        float* grads, BlockActivations& a, float* dres, GptScratch& s,
                        MoeLayer* moe = nullptr, float loss_scale = 0.0f);

// Backward of the attention half: dres becomes the gradient of the block input x.
// Accumulates the gradients of [ln_1 .. attn.c_proj] into grads.
void block_backward_attention(const GptPass& pass, const GptBlockParams& w, const float* params,
                              float* grads, BlockActivations& a, const float* x, float* dres,
                              GptScratch& s);

}  // namespace brigade
