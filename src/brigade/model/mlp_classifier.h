#pragma once
// A multi-layer perceptron classifier: (Linear -> GELU) per hidden layer, a final Linear
// and a fused softmax cross-entropy. The small model for image sets (MNIST-like data) and
// for testing the distributed machinery on something cheaper than a transformer.
#include <cstdint>
#include <vector>

#include "brigade/model/classifier_head.h"
#include "brigade/model/model.h"

namespace brigade {

struct MlpConfig {
  int64_t input = 784;                       // D: features per example
  std::vector<int64_t> hidden = {256, 128};  // widths of the hidden layers (may be empty)
  int64_t classes = 10;                      // K
  // Throws ConfigError naming the field when a value is out of range.
  void validate() const;
};

class MlpClassifier : public Model {
 public:
  // Layout in forward order: fc.{i}.weight (hidden[i], fan_in), fc.{i}.bias, head.weight
  // (classes, fan_in), head.bias. Initialisation: weights normal(0, 1/sqrt(fan_in)) (LeCun
  // normal, keeps pre-activations at unit scale), biases zero. Allocates all activation
  // buffers for max_batch examples.
  MlpClassifier(const MlpConfig& config, int64_t max_batch);

  const MlpConfig& config() const { return config_; }
  int64_t max_batch() const override { return max_batch_; }

  // batch.features holds (batch.size, input) values, batch.targets batch.size labels in
  // [0, classes) or < 0 (ignored). Returns the mean cross-entropy over the valid labels.
  float forward(const Batch& batch) override;

  // Backward of the last forward (one per forward). Reports head first, then fc.{n-1} .. fc.0.
  void backward(const Batch& batch, float loss_scale) override;

  int64_t correct_predictions() const override { return head_.correct(); }

  // Logits (batch.size, classes) of the last forward; backward overwrites them in place.
  const float* logits() const { return head_.logits(); }

  // 6 * (weights + biases) per example: 2 flops per multiply-add, times 3 for forward +
  // the two backward matmuls.
  double flops_per_example() const override;

 private:
  struct Layer {
    int64_t in, out, weight, bias;  // widths and offsets in the flat buffer
  };

  MlpConfig config_;
  int64_t max_batch_;
  std::vector<Layer> layers_;             // hidden layers, then the head
  std::vector<std::vector<float>> pre_;   // per hidden layer: (B, out) before GELU
  std::vector<std::vector<float>> post_;  // per hidden layer: (B, out) after GELU
  ClassifierHead head_;                   // the head layer, the loss and its gradient
  std::vector<float> dact_a_, dact_b_;    // (B, widest layer): activation gradients
};

}  // namespace brigade
