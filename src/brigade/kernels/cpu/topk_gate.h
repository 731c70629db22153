#pragma once
// Top-k gating of a mixture-of-experts router (k = 1 or 2).
//
// Selection: the k largest probabilities of a row, largest first; equal probabilities go to the
// lower expert index, so routing is a deterministic function of the probabilities.
// Gates: k = 1 keeps the probability itself, g = p (Switch Transformer: renormalising a single
// choice would give g = 1 and cut the router off from the task loss); k = 2 renormalises over
// the two choices, g_i = p_i / (p_a + p_b) (GShard, Mixtral).
#include <cstdint>

namespace brigade {

// probs is (N,E); expert and gate are (N,K), K in {1, 2}, K <= E.
void topk_gate_forward(int32_t* expert, float* gate, const float* probs, int64_t N, int64_t E,
                       int K);

// dprobs (N,E) += d gate / d probs^T @ dgate, row by row; dgate is (N,K). Only the chosen
// entries of a row receive gradient (the choice itself is piecewise constant).
void topk_gate_backward(float* dprobs, const float* probs, const int32_t* expert,
                        const float* dgate, int64_t N, int64_t E, int K);

}  // namespace brigade
