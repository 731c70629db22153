#include "brigade/model/gpt_sublayer.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/residual.h"
#include "brigade/kernels/cpu/vocab_parallel.h"
#include "brigade/model/tp/tp_comm.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

void GptScratch::allocate(int64_t max_bt, int64_t max_rows, int64_t C, int64_t fc_local,
                          int64_t lora_rank) {
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  full.resize(sz(max_bt * C));
  din.resize(sz(max_bt * C));
  rows.resize(sz(max_rows * C));
  d4c_a.resize(sz(max_bt * fc_local));
  d4c_b.resize(sz(max_bt * fc_local));
  dnorm.resize(sz(2 * C));
  lora_u.resize(sz(max_bt * lora_rank));
  lora_du.resize(sz(max_bt * lora_rank));
  lora_part.resize(sz(lora_rank * C));  // a column-parallel layer's dA (in = C)
}

LoraSite lora_site(const GptPass& pass, const LoraParams& params, const float* p, float* g,
                   GptScratch& s) {
  if (!params.on()) return {};
  BRIGADE_CHECK(static_cast<int64_t>(s.lora_u.size()) >= pass.BT * pass.config->lora_rank)
      << "GptScratch allocated without LoRA buffers";
  return LoraSite{.a = p + params.a,
                  .b = p + params.b,
                  .da = g ? g + params.a : nullptr,
                  .db = g ? g + params.b : nullptr,
                  .u = s.lora_u.data(),
                  .du = s.lora_du.data(),
                  .rank = pass.config->lora_rank,
                  .scale = pass.config->lora_scale(),
                  .tp = pass.tp,
                  .row_parallel = params.row_parallel,
                  .part = s.lora_part.data()};
}

void zero_prefix(const GptPass& pass, std::vector<float>& v, int64_t n) {
  ScopedOp scope(pass.profiler, Op::kZeroFill);
  std::fill(v.begin(), v.begin() + n, 0.0f);
}

void norm_enter_forward(const GptPass& pass, float* in_full, float* mean, float* rstd,
                        const float* x, const float* w, const float* b, GptScratch& s) {
  const TpContext& tp = *pass.tp;
  float* out = tp.sp() ? s.rows.data() : in_full;
  timed(pass.profiler, Op::kLayernormForward, layernorm_forward, out, mean, rstd, x, w, b,
        pass.rows, pass.C);
  if (tp.sp()) gather_from_sequence_forward(tp, out, in_full, pass.rows * pass.C);
  // Without sequence parallelism this is f's forward: every rank already holds in_full.
}

void norm_enter_backward(const GptPass& pass, float* dres, float* dw, float* db, float* din_full,
                         const float* x, const float* w, const float* mean, const float* rstd,
                         GptScratch& s) {
  const TpContext& tp = *pass.tp;
  const int64_t C = pass.C;
  if (!tp.sp()) {
    copy_to_tp_backward(tp, din_full, pass.BT * C);
    timed(pass.profiler, Op::kLayernormBackward, layernorm_backward, dres, dw, db, din_full, x, w,
          mean, rstd, pass.rows, C);
    return;
  }
  float* drows = s.rows.data();
  gather_from_sequence_backward(tp, din_full, drows, pass.rows * C);
  zero_prefix(pass, s.dnorm, 2 * C);
  timed(pass.profiler, Op::kLayernormBackward, layernorm_backward, dres, s.dnorm.data(),
        s.dnorm.data() + C, drows, x, w, mean, rstd, pass.rows, C);
  all_reduce_replicated_grads(tp, s.dnorm.data(), 2 * C);
  for (int64_t c = 0; c < C; ++c) {
    dw[c] += s.dnorm[c];
    db[c] += s.dnorm[C + c];
  }
}

void row_parallel_exit_forward(const GptPass& pass, float* out, const float* x, const float* inp,
                               const float* weight, const float* bias, int64_t in_local,
                               GptScratch& s, const LoraSite& lora) {
  const TpContext& tp = *pass.tp;
  const int64_t C = pass.C;
  float* partial = s.full.data();
  timed(pass.profiler, Op::kMatmulForward, matmul_forward, partial, inp, weight,
        tp.active() ? nullptr : bias, pass.BT, in_local, C);
  if (lora.on())
    timed(pass.profiler, Op::kMatmulForward, lora_forward, partial, inp, lora, pass.BT, in_local,
          C);
  float* y = partial;
  if (tp.sp()) {
    y = s.rows.data();
    reduce_scatter_to_sequence_forward(tp, partial, y, pass.rows * C);
  } else {
    reduce_from_tp_forward(tp, partial, pass.BT * C);
  }
  if (tp.active()) bias_forward(y, bias, pass.rows, C);
  timed(pass.profiler, Op::kResidualForward, residual_forward, out, x, y, pass.rows * C);
}

void row_parallel_exit_backward(const GptPass& pass, float* dinp, float* dweight, float* dbias,
                                const float* dres, const float* inp, const float* weight,
                                int64_t in_local, GptScratch& s, const LoraSite& lora) {
  const TpContext& tp = *pass.tp;
  const float* dy = dres;  // g's backward is the identity without sequence parallelism
  if (tp.sp()) {
    reduce_scatter_to_sequence_backward(tp, dres, s.full.data(), pass.rows * pass.C);
    dy = s.full.data();
  }
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, dinp, dweight, dbias, dy, inp, weight,
        pass.BT, in_local, pass.C);
  if (lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward, dinp, dy, inp, lora, pass.BT, in_local,
          pass.C);
}

void row_parallel_exit_backward_input(const GptPass& pass, float* dinp, float* dy,
                                      const float* dres, const float* weight, int64_t in_local,
                                      const LoraSite& lora) {
  const TpContext& tp = *pass.tp;
  if (tp.sp()) {
    reduce_scatter_to_sequence_backward(tp, dres, dy, pass.rows * pass.C);
  } else {
    std::copy(dres, dres + pass.BT * pass.C, dy);
  }
  // The same sgemm as row_parallel_exit_backward's first product, so dinp is bitwise the same.
  timed(pass.profiler, Op::kMatmulBackward, matmul_backward, dinp, nullptr, nullptr, dy, nullptr,
        weight, pass.BT, in_local, pass.C);
  if (lora.on())
    timed(pass.profiler, Op::kMatmulBackward, lora_backward_input, dinp, dy, lora, pass.BT,
          in_local, pass.C);
}

}  // namespace brigade
