#include "brigade/model/classifier_head.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/op_profiler.h"

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

ClassifierHead::ClassifierHead(int64_t max_batch, int64_t classes)
    : classes_(classes),
      logits_(static_cast<size_t>(max_batch * classes)),
      losses_(static_cast<size_t>(max_batch)),
      lse_(static_cast<size_t>(max_batch)) {}

float ClassifierHead::forward(OpProfiler* profiler, const float* x, const float* weight,
                              const float* bias, const int32_t* targets, int64_t B, int64_t in) {
  const int64_t K = classes_;
  timed(profiler, Op::kMatmulForward, matmul_forward, logits_.data(), x, weight, bias, B, in, K);
  timed(profiler, Op::kCrossentropyForward, crossentropy_forward, losses_.data(), lse_.data(),
        logits_.data(), targets, B, K);
  loss_ = reduce_classifier_loss(losses_.data(), logits_.data(), targets, B, K);
  backward_ready_ = true;
  return loss_.mean;
}

const float* ClassifierHead::backward(OpProfiler* profiler, const int32_t* targets,
                                      float loss_scale, int64_t B) {
  BRIGADE_CHECK(backward_ready_) << "backward needs a forward before it";
  backward_ready_ = false;  // the cross-entropy backward overwrites the logits in place
  const float dloss = loss_.valid > 0 ? loss_scale / static_cast<float>(loss_.valid) : 0.0f;
  timed(profiler, Op::kCrossentropyBackward, crossentropy_backward, logits_.data(), logits_.data(),
        lse_.data(), targets, dloss, B, classes_);
  return logits_.data();
}

}  // namespace brigade
