// At tp = 1 these run llm.c's kernels (encoder, fused cross-entropy) exactly as the
// single-process model always did; the vocab-parallel kernels take over only when tp > 1.
#include "brigade/model/gpt_head.h"

#include <algorithm>

#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/encoder.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/vocab_parallel.h"
#include "brigade/model/tp/tp_comm.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

void HeadActivations::allocate(const GptConfig& c, const GptShard& sh, int64_t max_batch,
                               int64_t max_rows) {
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const int64_t BT = max_batch * c.seq_len;
  lnf_mean.resize(sz(max_rows));
  lnf_rstd.resize(sz(max_rows));
  lnf.resize(sz(BT * c.d_model));
  logits.resize(sz(BT * sh.vocab_local));
  losses.resize(sz(BT));
  lse.resize(sz(BT));
  ce_max.resize(sz(BT));
  ce_sums.resize(sz(2 * BT));
}

void embedding_forward(const GptPass& pass, const GptParams& w, const float* p,
                       const int32_t* tokens, float* out, GptScratch& s) {
  const TpContext& tp = *pass.tp;
  const int64_t C = pass.C, T = pass.T;
  if (!tp.active()) {
    timed(pass.profiler, Op::kEncoderForward, encoder_forward, out, tokens, p + w.wte, p + w.wpe,
          pass.B, T, C);
    return;
  }
  const GptShard& sh = *pass.shard;
  // Each rank looks up the tokens of its vocab rows (zero for the others); the sum over ranks
  // completes every row. wpe is added after the sum, on this rank's rows only. (Communication
  // is not timed as a kernel: it shows as the profile's untimed rest.)
  float* partial = tp.sp() ? s.full.data() : out;
  timed(pass.profiler, Op::kEncoderForward, vocab_parallel_embedding_forward, partial, tokens,
        p + w.wte, pass.BT, C, sh.vocab_begin, sh.vocab_local);
  if (tp.sp()) {
    reduce_scatter_to_sequence_forward(tp, partial, out, pass.rows * C);
  } else {
    reduce_from_tp_forward(tp, out, pass.BT * C);
  }
  timed(pass.profiler, Op::kEncoderForward, position_embedding_forward, out, p + w.wpe, pass.row0,
        pass.rows, T, C);
}

void embedding_backward(const GptPass& pass, const GptParams& w, float* g, const int32_t* tokens,
                        const float* dres, GptScratch& s) {
  const TpContext& tp = *pass.tp;
  const int64_t C = pass.C, T = pass.T;
  if (!tp.active()) {
    timed(pass.profiler, Op::kEncoderBackward, encoder_backward, g + w.wte, g + w.wpe, dres, tokens,
          pass.B, T, C);
    return;
  }
  const GptShard& sh = *pass.shard;
  // Under SP the backward of the reduce-scatter gathers every row's gradient, so wpe's
  // gradient is taken over all rows and is the same on every rank (no all-reduce needed).
  const float* dfull = dres;
  if (tp.sp()) {
    reduce_scatter_to_sequence_backward(tp, dres, s.full.data(), pass.rows * C);
    dfull = s.full.data();
  }
  timed(pass.profiler, Op::kEncoderBackward, vocab_parallel_embedding_backward, g + w.wte, dfull,
        tokens, pass.BT, C, sh.vocab_begin, sh.vocab_local);
  timed(pass.profiler, Op::kEncoderBackward, position_embedding_backward, g + w.wpe, dfull, 0,
        pass.BT, T, C);
}

void head_forward(const GptPass& pass, const GptParams& w, const float* p, const float* x,
                  HeadActivations& h, GptScratch& s) {
  norm_enter_forward(pass, h.lnf.data(), h.lnf_mean.data(), h.lnf_rstd.data(), x, p + w.lnf_w,
                     p + w.lnf_b, s);
  timed(pass.profiler, Op::kMatmulForward, matmul_forward, h.logits.data(), h.lnf.data(), p + w.wte,
        nullptr, pass.BT, pass.C, pass.shard->vocab_local);
}

void loss_forward(const GptPass& pass, HeadActivations& h, const int32_t* targets) {
  const TpContext& tp = *pass.tp;
  const GptShard& sh = *pass.shard;
  const int64_t BT = pass.BT, V = pass.config->vocab;
  if (!tp.active()) {
    timed(pass.profiler, Op::kCrossentropyForward, crossentropy_forward, h.losses.data(),
          h.lse.data(), h.logits.data(), targets, BT, V);
    return;
  }
  const int64_t Vl = sh.vocab_local, v0 = sh.vocab_begin;
  const Op op = Op::kCrossentropyForward;
  timed(pass.profiler, op, vocab_parallel_ce_max, h.ce_max.data(), h.logits.data(), BT, Vl, v0, V);
  all_reduce_max(tp, h.ce_max.data(), BT);
  timed(pass.profiler, op, vocab_parallel_ce_sums, h.ce_sums.data(), h.logits.data(),
        h.ce_max.data(), targets, BT, Vl, v0, V);
  all_reduce_sum(tp, h.ce_sums.data(), 2 * BT);
  timed(pass.profiler, op, vocab_parallel_ce_finish, h.losses.data(), h.lse.data(), h.ce_max.data(),
        h.ce_sums.data(), targets, BT);
}

void head_backward(const GptPass& pass, const GptParams& w, const float* p, float* g,
                   const float* x, const int32_t* targets, float dloss, HeadActivations& h,
                   float* dres, GptScratch& s) {
  const TpContext& tp = *pass.tp;
  const GptShard& sh = *pass.shard;
  const int64_t BT = pass.BT, C = pass.C, V = pass.config->vocab, Vl = sh.vocab_local;
  if (tp.active()) {
    timed(pass.profiler, Op::kCrossentropyBackward, vocab_parallel_ce_backward, h.logits.data(),
          h.logits.data(), h.lse.data(), targets, dloss, BT, Vl, sh.vocab_begin, V);
  } else {
    timed(pass.profiler, Op::kCrossentropyBackward, crossentropy_backward, h.logits.data(),
          h.logits.data(), h.lse.data(), targets, dloss, BT, V);
  }
  zero_prefix(pass, s.din, BT * C);
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, s.din.data(), g + w.wte, nullptr,
        h.logits.data(), h.lnf.data(), p + w.wte, BT, C, Vl);
  {
    ScopedOp scope(pass.profiler, Op::kZeroFill);
    std::fill(dres, dres + pass.rows * C, 0.0f);
  }
  norm_enter_backward(pass, dres, g + w.lnf_w, g + w.lnf_b, s.din.data(), x, p + w.lnf_w,
                      h.lnf_mean.data(), h.lnf_rstd.data(), s);
}

}  // namespace brigade
