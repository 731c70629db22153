// Causal self-attention with FlashAttention's online softmax, on the CPU.
//
// Forward, for one query row q_t of one head: keys 0..t are visited in blocks of
// kAttentionBlock. For each block the scaled scores s_j = scale * q_t . k_j are computed, the
// running maximum m is raised to cover them, and the partial results are rescaled:
//   l   <- l * exp(m_old - m_new) + sum_j exp(s_j - m_new)
//   acc <- acc * exp(m_old - m_new) + sum_j exp(s_j - m_new) v_j
// At the end out_t = acc / l and lse_t = m + log(l), so softmax(s)_j = exp(s_j - lse_t).
//
// Backward, per query row, with p_j = exp(s_j - lse_t) recomputed and D_t = dout_t . out_t
// (= sum_j p_j dp_j, the softmax Jacobian's correction term):
//   dp_j = dout_t . v_j,  ds_j = p_j (dp_j - D_t),
//   dq_t += scale sum_j ds_j k_j,  dk_j += scale ds_j q_t,  dv_j += p_j dout_t.
//
// As in FlashAttention, query rows are processed in tiles of kAttentionBlock rows too, so the
// score block of a tile is a (rows x keys) product that gemm_f32() computes (and likewise the
// P V, dP, dQ, dK and dV products); the softmax bookkeeping stays per row. Tiles align with
// key blocks, so only the diagonal block of a tile needs the causal mask. The score blocks
// live on the stack (64 KiB each); nothing is allocated. The per-row softmax bookkeeping (max,
// rescaling, exp, mask, sums) is elementwise_kernels.inc's, on the ISA of kernel_isa.h; exp is
// vec.h's fast exp there.
// 128-wide blocks measured 12-15% faster than 64 (fewer, larger tile products: call overhead and,
// under bf16, operand rounding weigh less) and 256 slower (half of a diagonal block is masked)
// at T = 256 (bench/RESULTS.md, "Mixed precision").
// The tile products run in f32 under train.precision = "bf16" too (gemm_f32): rounding two
// 128 x 64 operands to bf16 for every tile cost more than the bf16 multiply saved, and made
// attention's backward 2x slower than in f32 on an AVX512_BF16 host (bench/RESULTS.md, "Mixed
// precision: attention tiles in f32").
#include "brigade/kernels/cpu/attention.h"

#include <cmath>
#include <limits>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/elementwise_ops.h"
#include "brigade/kernels/cpu/gemm_backend.h"

namespace brigade {

namespace {

constexpr int64_t kBlk = kAttentionBlock;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH) {
  BRIGADE_CHECK(NH > 0 && C % NH == 0) << "C=" << C << " NH=" << NH;
  BRIGADE_CHECK(3 * C <= INT32_MAX) << "C=" << C;
  const int64_t hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const detail::ElementwiseOps& ops = detail::elementwise_ops();
  float S[kBlk * kBlk];    // scores, then probabilities, of one (query tile, key block)
  float m[kBlk], l[kBlk];  // running max and sum per query row of the tile
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      // Row t of head h: q at qh + t*C3, k at qh + t*C3 + C, v at qh + t*C3 + 2C; out at oh + t*C.
      const float* qh = qkv + b * T * C3 + h * hs;
      float* oh = out + b * T * C + h * hs;
      for (int64_t q0 = 0; q0 < T; q0 += kBlk) {
        const int64_t rows = T - q0 < kBlk ? T - q0 : kBlk;
        for (int64_t r = 0; r < rows; ++r) {
          m[r] = kNegInf;
          l[r] = 0.0f;
          float* o = oh + (q0 + r) * C;
          for (int64_t i = 0; i < hs; ++i) o[i] = 0.0f;
        }
        for (int64_t j0 = 0; j0 <= q0; j0 += kBlk) {
          const bool diagonal = j0 == q0;
          const int64_t keys = diagonal ? rows : kBlk;
          // S = scale Q_tile K_block^T
          gemm_f32(false, true, rows, keys, hs, scale, qh + q0 * C3, C3, qh + j0 * C3 + C, C3, 0.0f,
                   S, kBlk);
          ops.attention_softmax_block(S, kBlk, rows, keys, diagonal, m, l, oh + q0 * C, C, hs);
          // out_tile += P V_block
          gemm_f32(false, false, rows, hs, keys, 1.0f, S, kBlk, qh + j0 * C3 + 2 * C, C3, 1.0f,
                   oh + q0 * C, C);
        }
        ops.attention_finish_tile(oh + q0 * C, C, rows, hs, m, l, lse + (b * NH + h) * T + q0);
      }
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH) {
  BRIGADE_CHECK(NH > 0 && C % NH == 0) << "C=" << C << " NH=" << NH;
  BRIGADE_CHECK(3 * C <= INT32_MAX) << "C=" << C;
  const int64_t hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const detail::ElementwiseOps& ops = detail::elementwise_ops();
  float P[kBlk * kBlk];   // probabilities of one (query tile, key block)
  float dS[kBlk * kBlk];  // dP, then dS = P (dP - D)
  float D[kBlk];          // dout_t . out_t per query row of the tile
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      // Same layout as in forward; dqkv mirrors qkv, dout mirrors out.
      const float* qh = qkv + b * T * C3 + h * hs;
      float* dqh = dqkv + b * T * C3 + h * hs;
      const float* oh = out + b * T * C + h * hs;
      const float* doh = dout + b * T * C + h * hs;
      const float* lse_bh = lse + (b * NH + h) * T;
      for (int64_t q0 = 0; q0 < T; q0 += kBlk) {
        const int64_t rows = T - q0 < kBlk ? T - q0 : kBlk;
        for (int64_t r = 0; r < rows; ++r) {
          D[r] = ops.dot(doh + (q0 + r) * C, oh + (q0 + r) * C, hs);
        }
        for (int64_t j0 = 0; j0 <= q0; j0 += kBlk) {
          const bool diagonal = j0 == q0;
          const int64_t keys = diagonal ? rows : kBlk;
          const float* q_tile = qh + q0 * C3;
          const float* k_blk = qh + j0 * C3 + C;
          const float* v_blk = qh + j0 * C3 + 2 * C;
          const float* dout_tile = doh + q0 * C;
          gemm_f32(false, true, rows, keys, hs, scale, q_tile, C3, k_blk, C3, 0.0f, P, kBlk);
          gemm_f32(false, true, rows, keys, hs, 1.0f, dout_tile, C, v_blk, C3, 0.0f, dS, kBlk);
          ops.attention_dsoftmax_block(P, dS, kBlk, rows, keys, diagonal, lse_bh + q0, D);
          // dV_block += P^T dout_tile;  dQ_tile += scale dS K_block;  dK_block += scale dS^T Q_tile
          gemm_f32(true, false, keys, hs, rows, 1.0f, P, kBlk, dout_tile, C, 1.0f,
                   dqh + j0 * C3 + 2 * C, C3);
          gemm_f32(false, false, rows, hs, keys, scale, dS, kBlk, k_blk, C3, 1.0f, dqh + q0 * C3,
                   C3);
          gemm_f32(true, false, keys, hs, rows, scale, dS, kBlk, q_tile, C3, 1.0f,
                   dqh + j0 * C3 + C, C3);
        }
      }
    }
  }
}

}  // namespace brigade
