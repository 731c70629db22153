#pragma once
// Row softmax with its backward, for small rows such as a mixture-of-experts router (E logits
// per token). Large vocabularies use the fused cross-entropy (crossentropy.h) instead, which
// never stores the probabilities.
#include <cstdint>

namespace brigade {

// probs (N,V): row n is softmax(logits[n]), computed stably (max subtracted). probs may alias
// logits.
void softmax_forward(float* probs, const float* logits, int64_t N, int64_t V);

// dlogits (N,V) += probs * (dprobs - sum_j probs[n,j] * dprobs[n,j]) per row. dlogits must not
// alias probs or dprobs.
void softmax_backward(float* dlogits, const float* probs, const float* dprobs, int64_t N,
                      int64_t V);

}  // namespace brigade
