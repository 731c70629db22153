#pragma once
// The reduction a classifier's forward ends with, shared by the MLP and the CNN.
#include <cstdint>

namespace brigade {

struct ClassifierLoss {
  float mean = 0.0f;    // mean cross-entropy over the valid labels; 0 without any
  int64_t valid = 0;    // labels >= 0 (a label < 0 is ignored)
  int64_t correct = 0;  // valid labels equal to their row's argmax logit (the first on ties)
};

// losses (B) as crossentropy_forward wrote them for logits (B,K) and targets (B).
ClassifierLoss reduce_classifier_loss(const float* losses, const float* logits,
                                      const int32_t* targets, int64_t B, int64_t K);

}  // namespace brigade
