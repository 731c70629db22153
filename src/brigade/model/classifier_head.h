#pragma once
// The end of every classifier (the MLP and the CNN): the head's linear layer, the cross-entropy
// of each row against its label, and the reduction to a mean loss and a count of correct
// predictions; backward turns the loss into the gradient w.r.t. the logits.
#include <cstdint>
#include <vector>

namespace brigade {

class OpProfiler;

struct ClassifierLoss {
  float mean = 0.0f;    // mean cross-entropy over the valid labels; 0 without any
  int64_t valid = 0;    // labels >= 0 (a label < 0 is ignored)
  int64_t correct = 0;  // valid labels equal to their row's argmax logit (the first on ties)
};

// losses (B) as crossentropy_forward wrote them for logits (B,K) and targets (B).
ClassifierLoss reduce_classifier_loss(const float* losses, const float* logits,
                                      const int32_t* targets, int64_t B, int64_t K);

class ClassifierHead {
 public:
  ClassifierHead(int64_t max_batch, int64_t classes);

  // logits = x (B, in) W^T + b with W (K, in); returns the mean cross-entropy over the valid
  // targets. The profiler (may be null) times each kernel.
  float forward(OpProfiler* profiler, const float* x, const float* weight, const float* bias,
                const int32_t* targets, int64_t B, int64_t in);
  // After forward: the gradient of loss_scale x the mean loss w.r.t. the logits, written over
  // them (so forward must run again before another backward).
  const float* backward(OpProfiler* profiler, const int32_t* targets, float loss_scale, int64_t B);

  int64_t correct() const { return loss_.correct; }
  const float* logits() const { return logits_.data(); }

 private:
  int64_t classes_;
  std::vector<float> logits_, losses_, lse_;  // (B,K), (B), (B)
  ClassifierLoss loss_;
  bool backward_ready_ = false;
};

}  // namespace brigade
