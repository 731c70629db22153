#pragma once
// One GPT-2 block, x -> x + attn(ln_1(x)) -> (+ mlp(ln_2(.))), as two sublayers built from
// gpt_sublayer.h, tensor-parallel when the pass's TpContext is: c_attn and mlp.c_fc are
// column-parallel (this rank's heads, this rank's 4C/tp features), attn.c_proj and mlp.c_proj
// row-parallel. LoRA adapters (GptBlockParams::lora_*, model/lora.h) add their low-rank term to
// the layers they target, in forward and in the fused backward (tp = 1; the split backward below
// does not support them). A mixture-of-experts block (GptBlockParams::is_moe) runs its MLP through
// a MoeMlp instead, which holds that layer's routing for one micro-batch (so the caller keeps one
// per MoE block and runs one forward before each backward; tp = 1 only). A dense block owns no
// state; its activations for one micro-batch live in a BlockActivations, so a caller (the whole
// model, or a pipeline stage holding a range of blocks and several micro-batches in flight) decides
// how many sets to keep.
#include <cstdint>
#include <vector>

#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_sublayer.h"

namespace brigade {

class MoeMlp;  // model/moe/moe_mlp.h: MoeLayer, or EpMoeLayer under expert parallelism

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
                    const float* x, BlockActivations& a, GptScratch& s, MoeMlp* moe = nullptr);

// Backward of the MLP half: dres (rows,C) holds the gradient of residual3 and becomes that of
// residual2. Accumulates the gradients of [ln_2 .. mlp.c_proj] (or of the router and experts)
// into grads. A MoE block needs its layer and loss_scale = d loss / d (its returned term).
void block_backward_mlp(const GptPass& pass, const GptBlockParams& w, const float* params,
                        float* grads, BlockActivations& a, float* dres, GptScratch& s,
                        MoeMlp* moe = nullptr, float loss_scale = 0.0f);

// Backward of the attention half: dres becomes the gradient of the block input x.
// Accumulates the gradients of [ln_1 .. attn.c_proj] into grads.
void block_backward_attention(const GptPass& pass, const GptBlockParams& w, const float* params,
                              float* grads, BlockActivations& a, const float* x, float* dres,
                              GptScratch& s);

// Split backward (ZB-H1, Qi et al. 2023): B = block_backward_input computes only what the
// previous block needs (the gradient of x, through every layernorm, attention and the four
// matmuls' input products), W = block_backward_weight the four matmuls' weight and bias
// gradients, dW += dy^T inp and db += sum of dy's rows, which nothing downstream waits for.
// Together they accumulate bitwise what block_backward_mlp + block_backward_attention do (the
// same sgemm calls on the same operands, only at other times), so gradients match the fused
// backward exactly when W runs for the micro-batches in the same order as their B.
// The layernorm gains and biases stay in B: their gradients come out of the same pass over the
// rows as the input gradient, and deferring them would mean keeping each layernorm's (BT,C)
// output gradient as well. Under sequence parallelism B therefore still runs their tp
// all-reduce; W never communicates.
//
// W reads, per matmul, its input (saved by forward) and its output gradient dy, which B leaves in
// a BlockWeightGrads, with Cl = C/tp, Fl = 4C/tp:
struct BlockWeightGrads {
  float* dqkv = nullptr;        // (BT,3Cl): gradient of c_attn's output
  float* dattn_proj = nullptr;  // (BT,C): of attn.c_proj's output (gathered under SP)
  float* dfc = nullptr;         // (BT,Fl): of mlp.c_fc's output
  float* dfc_proj = nullptr;    // (BT,C): of mlp.c_proj's output (gathered under SP)
};
// BT (3Cl + Fl + 2C) floats per block and micro-batch, held from B to W.
// A caller that copies the block's activations out of `a` before B may place them over the
// saved copies of qkv and fch (same sizes), and, when rows == BT, of residual2 and residual3
// (GptStage does): B reads none of these from the saved copy and W does not need them.

// B. x (rows,C) is the block input, dres (rows,C) the gradient of residual3 in, of x out; `out`'s
// buffers must not alias a. Accumulates into grads only the layernorm gains and biases (and, for
// a MoE block, everything: its backward stays fused, W has nothing to do for it and `out` is
// unused; moe and loss_scale as for block_backward_mlp).
void block_backward_input(const GptPass& pass, const GptBlockParams& w, const float* params,
                          float* grads, BlockActivations& a, const float* x, float* dres,
                          const BlockWeightGrads& out, GptScratch& s, MoeMlp* moe = nullptr,
                          float loss_scale = 0.0f);

// W's operands: the four matmuls' inputs (a's attn_in, atty, mlp_in, fch_gelu, or wherever the
// caller keeps them) and what B wrote.
struct BlockWeightInputs {
  const float* attn_in = nullptr;   // (BT,C)
  const float* atty = nullptr;      // (BT,Cl)
  const float* mlp_in = nullptr;    // (BT,C)
  const float* fch_gelu = nullptr;  // (BT,Fl)
  const float* dqkv = nullptr;
  const float* dattn_proj = nullptr;
  const float* dfc = nullptr;
  const float* dfc_proj = nullptr;
};

// W: accumulates the weight and bias gradients of c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj,
// and their adapters' (which read params; s is their scratch), into grads. Does nothing for a
// MoE block (see block_backward_input).
void block_backward_weight(const GptPass& pass, const GptBlockParams& w, const float* params,
                           float* grads, const BlockWeightInputs& in, GptScratch& s);

}  // namespace brigade
