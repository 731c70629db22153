#include "brigade/model/classifier_loss.h"

#include <algorithm>

namespace brigade {

ClassifierLoss reduce_classifier_loss(const float* losses, const float* logits,
                                      const int32_t* targets, int64_t B, int64_t K) {
  ClassifierLoss r;
  double sum = 0.0;
  for (int64_t n = 0; n < B; ++n) {
    const int32_t label = targets[n];
    if (label < 0) continue;
    sum += losses[n];
    ++r.valid;
    const float* row = logits + n * K;
    if (std::max_element(row, row + K) - row == label) ++r.correct;
  }
  if (r.valid > 0) r.mean = static_cast<float>(sum / static_cast<double>(r.valid));
  return r;
}

}  // namespace brigade
