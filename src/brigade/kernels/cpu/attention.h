#pragma once
// Causal multi-head self-attention, computed block by block with an online softmax
// (FlashAttention's recurrence, on the CPU): at most one block of kAttentionBlock scores
// per query row exists at a time, never the T x T matrix. Query rows go in tiles of
// kAttentionBlock, so each (tile, key block) product is a gemm() (gemm_backend.h). Backward
// recomputes the scores from q, k and the saved log-sum-exp. No allocation (the blocks live
// on the stack, 128 KiB in backward).
#include <cstdint>

namespace brigade {

inline constexpr int64_t kAttentionBlock = 128;

// qkv is (B,T,3C): q, k, v concatenated along the last axis, each split into NH heads of
// size hs = C/NH. out is (B,T,C). lse is (B,NH,T): log-sum-exp of each query row's scaled
// scores, saved for backward. Scale is 1/sqrt(hs).
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH);

// dqkv += gradient w.r.t. qkv (B,T,3C), given dout (B,T,C) and the forward's out and lse.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH);

}  // namespace brigade
