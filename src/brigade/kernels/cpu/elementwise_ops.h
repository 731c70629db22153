#pragma once
// The element-wise kernels' table, one per ISA (elementwise_{default,avx2,avx512}.cc compile
// elementwise_kernels.inc for their ISA); the public kernels (gelu.h, layernorm.h, residual.h,
// attention.h, crossentropy.h, vocab_parallel.h, optim.h) call through the table of
// elementwise_isa() (kernel_isa.h). Contracts are those of the public headers unless noted.
#include <cstdint>

#include "brigade/kernels/cpu/kernel_isa.h"

namespace brigade::detail {

// AdamW's constants for one call, bias corrections already computed (optim.cc).
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

struct SgdStep {
  float lr, momentum, weight_decay;
  bool nesterov;
};

struct ElementwiseOps {
  KernelIsa isa;

  void (*gelu_forward)(float* out, const float* inp, int64_t N);
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, int64_t N);
  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C);
  void (*layernorm_backward)(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int64_t C);
  void (*residual_forward)(float* out, const float* inp1, const float* inp2, int64_t N);
  void (*residual_backward)(float* dinp1, float* dinp2, const float* dout, int64_t N);

  // vec.h's row helpers, bitwise as there: max_i in[i] (n >= 1); sum_i exp(in[i] - shift) in
  // double; out[i] = exp(in[i] - shift) * scale (out may alias in); sum_i a[i] b[i].
  float (*max_of)(const float* in, int64_t n);
  double (*sum_exp_shifted)(const float* in, float shift, int64_t n);
  void (*exp_shifted_scaled)(float* out, const float* in, float shift, float scale, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);

  // Attention's online softmax for one (query tile, key block) of attention.cc: S is rows x keys
  // scores (row stride ldS), the tile's output rows o (row stride ldo, hs wide) and their running
  // max m and sum l. Raises m to each row's block max (rescaling l and o), turns the scores into
  // exp(s - m) with the causal mask (diagonal: row r sees keys 0..r) as zeros, adds them to l.
  void (*attention_softmax_block)(float* S, int64_t ldS, int64_t rows, int64_t keys, bool diagonal,
                                  float* m, float* l, float* o, int64_t ldo, int64_t hs);
  // The tile's end: o /= l per row; lse[r] = m[r] + log(l[r]).
  void (*attention_finish_tile)(float* o, int64_t ldo, int64_t rows, int64_t hs, const float* m,
                                const float* l, float* lse);
  // Backward of one block: P = exp(S - lse) and dS = P (dP - D) in place (dP arrives in dS),
  // both zero where masked.
  void (*attention_dsoftmax_block)(float* P, float* dS, int64_t ld, int64_t rows, int64_t keys,
                                   bool diagonal, const float* lse, const float* D);

  void (*adamw_update)(float* param, const float* grad, float* m, float* v, int64_t n,
                       const AdamWStep& hp);
  void (*sgd_update)(float* param, const float* grad, float* buf, int64_t n, const SgdStep& hp);
  double (*sum_squares)(const float* x, int64_t n);
  void (*scale_inplace)(float* x, float s, int64_t n);
  bool (*all_finite)(const float* x, int64_t n);
};

const ElementwiseOps& elementwise_ops_default();
const ElementwiseOps& elementwise_ops_avx2();
const ElementwiseOps& elementwise_ops_avx512();

// The table of elementwise_isa().
const ElementwiseOps& elementwise_ops();

}  // namespace brigade::detail
