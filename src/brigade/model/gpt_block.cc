// The block's arithmetic is llm.c's; gpt_sublayer.cc adds the tensor-parallel entry and exit.
// With Cl = C/tp and NHl = NH/tp, this rank's qkv (BT,3Cl) is [q | k | v] of its own heads
// (c_attn's shard takes the same rows of each of q, k, v), so the attention kernel runs
// unchanged on NHl heads of size C/NH, and its output columns are the input columns of this
// rank's attn.c_proj shard.
#include "brigade/model/gpt_block.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/attention.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/residual.h"
#include "brigade/model/moe/moe_layer.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

void BlockActivations::allocate(const GptConfig& c, const GptShard& sh, int64_t max_batch,
                                int64_t max_rows, bool dense_mlp) {
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const int64_t BT = max_batch * c.seq_len, C = c.d_model;
  ln1_mean.resize(sz(max_rows));
  ln1_rstd.resize(sz(max_rows));
  attn_in.resize(sz(BT * C));
  qkv.resize(sz(BT * 3 * sh.c_local));
  atty.resize(sz(BT * sh.c_local));
  lse.resize(sz(max_batch * sh.heads_local * c.seq_len));
  residual2.resize(sz(max_rows * C));
  ln2_mean.resize(sz(max_rows));
  ln2_rstd.resize(sz(max_rows));
  mlp_in.resize(sz(BT * C));
  fch.resize(dense_mlp ? sz(BT * sh.fc_local) : 0);
  fch_gelu.resize(dense_mlp ? sz(BT * sh.fc_local) : 0);
  residual3.resize(sz(max_rows * C));
}

float block_forward(const GptPass& pass, const GptBlockParams& w, const float* p, const float* x,
                    BlockActivations& a, GptScratch& s, MoeMlp* moe) {
  BRIGADE_CHECK(w.is_moe == (moe != nullptr)) << "a MoE block needs its MoeLayer, a dense one none";
  const int64_t BT = pass.BT, C = pass.C;
  const int64_t Cl = pass.shard->c_local, NHl = pass.shard->heads_local;
  const int64_t Fl = pass.shard->fc_local;
  // Attention: residual2 = x + c_proj(attn(c_attn(ln_1(x)))).
  norm_enter_forward(pass, a.attn_in.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p + w.ln1_w,
                     p + w.ln1_b, s);
  timed(pass.profiler, Op::kMatmulForward, matmul_forward, a.qkv.data(), a.attn_in.data(),
        p + w.attn_w, p + w.attn_b, BT, C, 3 * Cl);
  if (const LoraSite lora = lora_site(pass, w.lora_attn, p, nullptr, s); lora.on())
    timed(pass.profiler, Op::kMatmulForward, lora_forward, a.qkv.data(), a.attn_in.data(), lora, BT,
          C, 3 * Cl);
  timed(pass.profiler, Op::kAttentionForward, attention_forward, a.atty.data(), a.lse.data(),
        a.qkv.data(), pass.B, pass.T, Cl, NHl);
  row_parallel_exit_forward(pass, a.residual2.data(), x, a.atty.data(), p + w.attn_proj_w,
                            p + w.attn_proj_b, Cl, s,
                            lora_site(pass, w.lora_attn_proj, p, nullptr, s));
  // MLP: residual3 = residual2 + c_proj(gelu(c_fc(ln_2(residual2)))).
  norm_enter_forward(pass, a.mlp_in.data(), a.ln2_mean.data(), a.ln2_rstd.data(),
                     a.residual2.data(), p + w.ln2_w, p + w.ln2_b, s);
  if (moe) {
    // tp = 1 (build_gpt_layout rejects MoE under tp): rows = BT. The expert output goes through
    // scratch.full, free between sublayers, then into the residual stream.
    const float aux = moe->forward(s.full.data(), a.mlp_in.data(), BT, p);
    timed(pass.profiler, Op::kResidualForward, residual_forward, a.residual3.data(),
          a.residual2.data(), s.full.data(), BT * C);
    return aux;
  }
  timed(pass.profiler, Op::kMatmulForward, matmul_forward, a.fch.data(), a.mlp_in.data(),
        p + w.fc_w, p + w.fc_b, BT, C, Fl);
  if (const LoraSite lora = lora_site(pass, w.lora_fc, p, nullptr, s); lora.on())
    timed(pass.profiler, Op::kMatmulForward, lora_forward, a.fch.data(), a.mlp_in.data(), lora, BT,
          C, Fl);
  timed(pass.profiler, Op::kGeluForward, gelu_forward, a.fch_gelu.data(), a.fch.data(), BT * Fl);
  row_parallel_exit_forward(pass, a.residual3.data(), a.residual2.data(), a.fch_gelu.data(),
                            p + w.fc_proj_w, p + w.fc_proj_b, Fl, s,
                            lora_site(pass, w.lora_fc_proj, p, nullptr, s));
  return 0.0f;
}

void block_backward_mlp(const GptPass& pass, const GptBlockParams& w, const float* p, float* g,
                        BlockActivations& a, float* dres, GptScratch& s, MoeMlp* moe,
                        float loss_scale) {
  const int64_t BT = pass.BT, C = pass.C, Fl = pass.shard->fc_local;
  BRIGADE_CHECK(w.is_moe == (moe != nullptr)) << "a MoE block needs its MoeLayer, a dense one none";
  if (moe) {
    // The residual add passes dres to the MoE output unchanged.
    zero_prefix(pass, s.din, BT * C);
    moe->backward(s.din.data(), dres, a.mlp_in.data(), loss_scale, p, g);
    norm_enter_backward(pass, dres, g + w.ln2_w, g + w.ln2_b, s.din.data(), a.residual2.data(),
                        p + w.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), s);
    return;
  }
  float* dfch_gelu = s.d4c_a.data();
  float* dfch = s.d4c_b.data();
  zero_prefix(pass, s.d4c_a, BT * Fl);
  row_parallel_exit_backward(pass, dfch_gelu, g + w.fc_proj_w, g + w.fc_proj_b, dres,
                             a.fch_gelu.data(), p + w.fc_proj_w, Fl, s,
                             lora_site(pass, w.lora_fc_proj, p, g, s));
  zero_prefix(pass, s.d4c_b, BT * Fl);
  timed(pass.profiler, Op::kGeluBackward, gelu_backward, dfch, a.fch.data(), dfch_gelu, BT * Fl);
  zero_prefix(pass, s.din, BT * C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, s.din.data(), g + w.fc_w, g + w.fc_b,
        dfch, a.mlp_in.data(), p + w.fc_w, BT, C, Fl);
  if (const LoraSite lora = lora_site(pass, w.lora_fc, p, g, s); lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward, s.din.data(), dfch, a.mlp_in.data(),
          lora, BT, C, Fl);
  norm_enter_backward(pass, dres, g + w.ln2_w, g + w.ln2_b, s.din.data(), a.residual2.data(),
                      p + w.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), s);
}

void block_backward_attention(const GptPass& pass, const GptBlockParams& w, const float* p,
                              float* g, BlockActivations& a, const float* x, float* dres,
                              GptScratch& s) {
  const int64_t BT = pass.BT, C = pass.C;
  const int64_t Cl = pass.shard->c_local, NHl = pass.shard->heads_local;
  float* datty = s.d4c_b.data();  // (BT,Cl): free once the MLP backward is done
  float* dqkv = s.d4c_a.data();   // (BT,3Cl)
  zero_prefix(pass, s.d4c_b, BT * Cl);
  row_parallel_exit_backward(pass, datty, g + w.attn_proj_w, g + w.attn_proj_b, dres, a.atty.data(),
                             p + w.attn_proj_w, Cl, s, lora_site(pass, w.lora_attn_proj, p, g, s));
  zero_prefix(pass, s.d4c_a, BT * 3 * Cl);
  timed(pass.profiler, Op::kAttentionBackward, attention_backward, dqkv, datty, a.qkv.data(),
        a.atty.data(), a.lse.data(), pass.B, pass.T, Cl, NHl);
  zero_prefix(pass, s.din, BT * C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, s.din.data(), g + w.attn_w,
        g + w.attn_b, dqkv, a.attn_in.data(), p + w.attn_w, BT, C, 3 * Cl);
  if (const LoraSite lora = lora_site(pass, w.lora_attn, p, g, s); lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward, s.din.data(), dqkv, a.attn_in.data(),
          lora, BT, C, 3 * Cl);
  norm_enter_backward(pass, dres, g + w.ln1_w, g + w.ln1_b, s.din.data(), x, p + w.ln1_w,
                      a.ln1_mean.data(), a.ln1_rstd.data(), s);
}

// Split backward: the fused functions above with matmul_backward's weight products taken out.
// Every remaining product, zero fill and layernorm call is the fused one's, in the same order.
void block_backward_input(const GptPass& pass, const GptBlockParams& w, const float* p, float* g,
                          BlockActivations& a, const float* x, float* dres,
                          const BlockWeightGrads& out, GptScratch& s, MoeMlp* moe,
                          float loss_scale) {
  BRIGADE_CHECK(w.is_moe == (moe != nullptr)) << "a MoE block needs its MoeLayer, a dense one none";
  if (moe) {
    block_backward_mlp(pass, w, p, g, a, dres, s, moe, loss_scale);
    block_backward_attention(pass, w, p, g, a, x, dres, s);
    return;
  }
  const int64_t BT = pass.BT, C = pass.C;
  const int64_t Cl = pass.shard->c_local, NHl = pass.shard->heads_local;
  const int64_t Fl = pass.shard->fc_local;
  // MLP half: dres is the gradient of residual3.
  float* dfch_gelu = s.d4c_a.data();
  zero_prefix(pass, s.d4c_a, BT * Fl);
  row_parallel_exit_backward_input(pass, dfch_gelu, out.dfc_proj, dres, p + w.fc_proj_w, Fl,
                                   lora_site(pass, w.lora_fc_proj, p, g, s));
  std::fill(out.dfc, out.dfc + BT * Fl, 0.0f);
  timed(pass.profiler, Op::kGeluBackward, gelu_backward, out.dfc, a.fch.data(), dfch_gelu, BT * Fl);
  zero_prefix(pass, s.din, BT * C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, s.din.data(), nullptr, nullptr,
        out.dfc, nullptr, p + w.fc_w, BT, C, Fl);
  if (const LoraSite lora = lora_site(pass, w.lora_fc, p, g, s); lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward_input, s.din.data(), out.dfc, lora, BT,
          C, Fl);
  norm_enter_backward(pass, dres, g + w.ln2_w, g + w.ln2_b, s.din.data(), a.residual2.data(),
                      p + w.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), s);
  // Attention half: dres is now the gradient of residual2.
  float* datty = s.d4c_b.data();
  zero_prefix(pass, s.d4c_b, BT * Cl);
  row_parallel_exit_backward_input(pass, datty, out.dattn_proj, dres, p + w.attn_proj_w, Cl,
                                   lora_site(pass, w.lora_attn_proj, p, g, s));
  std::fill(out.dqkv, out.dqkv + BT * 3 * Cl, 0.0f);
  timed(pass.profiler, Op::kAttentionBackward, attention_backward, out.dqkv, datty, a.qkv.data(),
        a.atty.data(), a.lse.data(), pass.B, pass.T, Cl, NHl);
  zero_prefix(pass, s.din, BT * C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, s.din.data(), nullptr, nullptr,
        out.dqkv, nullptr, p + w.attn_w, BT, C, 3 * Cl);
  if (const LoraSite lora = lora_site(pass, w.lora_attn, p, g, s); lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward_input, s.din.data(), out.dqkv, lora, BT,
          C, 3 * Cl);
  norm_enter_backward(pass, dres, g + w.ln1_w, g + w.ln1_b, s.din.data(), x, p + w.ln1_w,
                      a.ln1_mean.data(), a.ln1_rstd.data(), s);
}

void block_backward_weight(const GptPass& pass, const GptBlockParams& w, const float* p, float* g,
                           const BlockWeightInputs& in, GptScratch& s) {
  if (w.is_moe) return;  // block_backward_input ran the whole fused backward
  const int64_t BT = pass.BT, C = pass.C;
  const int64_t Cl = pass.shard->c_local, Fl = pass.shard->fc_local;
  // Row-parallel layers: (N, C, OC) = (BT, in_local, C); column-parallel: (BT, C, out_local).
  // Each adapter's dA and dB after its layer's weight gradient, as the fused backward adds them.
  const auto adapter = [&](const LoraParams& params, const float* dy, const float* x, int64_t n_in,
                           int64_t n_out) {
    if (const LoraSite lora = lora_site(pass, params, p, g, s); lora.on())
      timed(pass.profiler, Op::kMatmulBackward, lora_backward_weight, dy, x, lora, BT, n_in, n_out);
  };
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, nullptr, g + w.fc_proj_w,
        g + w.fc_proj_b, in.dfc_proj, in.fch_gelu, nullptr, BT, Fl, C);
  adapter(w.lora_fc_proj, in.dfc_proj, in.fch_gelu, Fl, C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, nullptr, g + w.fc_w, g + w.fc_b,
        in.dfc, in.mlp_in, nullptr, BT, C, Fl);
  adapter(w.lora_fc, in.dfc, in.mlp_in, C, Fl);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, nullptr, g + w.attn_proj_w,
        g + w.attn_proj_b, in.dattn_proj, in.atty, nullptr, BT, Cl, C);
  adapter(w.lora_attn_proj, in.dattn_proj, in.atty, Cl, C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, nullptr, g + w.attn_w, g + w.attn_b,
        in.dqkv, in.attn_in, nullptr, BT, C, 3 * Cl);
  adapter(w.lora_attn, in.dqkv, in.attn_in, C, 3 * Cl);
}

}  // namespace brigade
