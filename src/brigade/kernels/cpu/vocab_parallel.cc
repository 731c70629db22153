// Vocab-parallel embedding and cross-entropy (see the header for the protocol). The
// cross-entropy passes reuse crossentropy.cc's row helpers (elementwise_ops.h, vec.h's on the ISA
// of kernel_isa.h): max, a sum of shifted exps in double, and the vectorised exp, restricted to
// the shard's real columns.
#include "brigade/kernels/cpu/vocab_parallel.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

namespace {

// Columns of the shard that hold real vocabulary entries: a prefix, since padding is at the end.
int64_t real_columns(int64_t Vl, int64_t v0, int64_t V) {
  return std::clamp<int64_t>(V - v0, 0, Vl);
}

}  // namespace

void vocab_parallel_embedding_forward(float* out, const int32_t* tokens, const float* wte_shard,
                                      int64_t N, int64_t C, int64_t v0, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = static_cast<int64_t>(tokens[n]) - v0;
    float* o = out + n * C;
    if (local >= 0 && local < Vl) {
      std::memcpy(o, wte_shard + local * C, static_cast<size_t>(C) * sizeof(float));
    } else {
      std::fill(o, o + C, 0.0f);
    }
  }
}

void vocab_parallel_embedding_backward(float* dwte_shard, const float* dout, const int32_t* tokens,
                                       int64_t N, int64_t C, int64_t v0, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = static_cast<int64_t>(tokens[n]) - v0;
    if (local < 0 || local >= Vl) continue;
    float* d = dwte_shard + local * C;
    const float* g = dout + n * C;
    for (int64_t c = 0; c < C; ++c) d[c] += g[c];
  }
}

void position_embedding_forward(float* out, const float* wpe, int64_t row0, int64_t rows, int64_t T,
                                int64_t C) {
  for (int64_t n = 0; n < rows; ++n) {
    const float* p = wpe + ((row0 + n) % T) * C;
    float* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] += p[c];
  }
}

void position_embedding_backward(float* dwpe, const float* dout, int64_t row0, int64_t rows,
                                 int64_t T, int64_t C) {
  for (int64_t n = 0; n < rows; ++n) {
    float* d = dwpe + ((row0 + n) % T) * C;
    const float* g = dout + n * C;
    for (int64_t c = 0; c < C; ++c) d[c] += g[c];
  }
}

void vocab_parallel_ce_max(float* row_max, const float* logits, int64_t N, int64_t Vl, int64_t v0,
                           int64_t V) {
  const int64_t real = real_columns(Vl, v0, V);
  for (int64_t n = 0; n < N; ++n)
    row_max[n] = real > 0 ? detail::elementwise_ops().max_of(logits + n * Vl, real) : -FLT_MAX;
}

void vocab_parallel_ce_sums(float* sums, const float* logits, const float* row_max,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v0, int64_t V) {
  const int64_t real = real_columns(Vl, v0, V);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * Vl;
    const int32_t tgt = targets[n];
    BRIGADE_CHECK(tgt < V) << "target " << tgt << " >= vocabulary " << V << " at row " << n;
    sums[n] =
        real > 0
            ? static_cast<float>(detail::elementwise_ops().sum_exp_shifted(row, row_max[n], real))
            : 0.0f;
    const int64_t local = static_cast<int64_t>(tgt) - v0;
    sums[N + n] = tgt >= 0 && local >= 0 && local < real ? row[local] : 0.0f;
  }
}

void vocab_parallel_ce_finish(float* losses, float* lse, const float* row_max, const float* sums,
                              const int32_t* targets, int64_t N) {
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = row_max[n] + std::log(sums[n]);
    losses[n] = targets[n] < 0 ? 0.0f : lse[n] - sums[N + n];
  }
}

void vocab_parallel_ce_backward(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, float dloss, int64_t N, int64_t Vl,
                                int64_t v0, int64_t V) {
  const int64_t real = real_columns(Vl, v0, V);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * Vl;
    float* drow = dlogits + n * Vl;
    const int32_t tgt = targets[n];
    BRIGADE_CHECK(tgt < V) << "target " << tgt << " >= vocabulary " << V << " at row " << n;
    if (tgt < 0) {
      std::fill(drow, drow + Vl, 0.0f);
      continue;
    }
    // Reads each group before writing it.
    detail::elementwise_ops().exp_shifted_scaled(drow, row, lse[n], dloss, real);
    std::fill(drow + real, drow + Vl, 0.0f);
    const int64_t local = static_cast<int64_t>(tgt) - v0;
    if (local >= 0 && local < real) drow[local] -= dloss;
  }
}

void bias_forward(float* out, const float* bias, int64_t N, int64_t OC) {
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
    for (int64_t c = 0; c < OC; ++c) o[c] += bias[c];
  }
}

}  // namespace brigade
