#pragma once
// Fused softmax + cross-entropy: the probabilities are never stored; backward recomputes
// them from the logits and the saved log-sum-exp.
#include <cstdint>

namespace brigade {

// For each row n of logits (N,V): lse[n] = log sum_j exp(logits[n,j]);
// losses[n] = lse[n] - logits[n, targets[n]]. A target < 0 is ignored: loss 0.
void crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                          int64_t N, int64_t V);

// dlogits[n,j] = dloss * (softmax(logits[n])_j - [j == targets[n]]), rows with target < 0
// get 0. WRITES (does not accumulate) dlogits, which may alias logits.
void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V);

}  // namespace brigade
