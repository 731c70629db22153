#pragma once
// A convolutional classifier for small images: stages of (conv k x k -> ReLU -> max-pool),
// a flatten, (Linear -> ReLU) per hidden layer, a final Linear and a fused softmax
// cross-entropy. The defaults are the CNN of NIID-Bench (Li et al., ICDE 2022) for 28x28x1
// images, LeNet-5's shape with ReLU and max-pooling:
//   conv 5x5 1->6, ReLU, pool 2 | conv 5x5 6->16, ReLU, pool 2 | 256 -> 120 -> 84 -> 10
// with 44,426 parameters. Each stage runs as conv -> max-pool -> ReLU: ReLU is monotone, so
// max(relu(x)) = relu(max(x)) and the gradients agree too (the window's first maximum gets it,
// when positive), at a quarter of the ReLU's work.
#include <cstdint>
#include <vector>

#include "brigade/kernels/cpu/conv2d.h"
#include "brigade/kernels/cpu/maxpool.h"
#include "brigade/model/classifier_head.h"
#include "brigade/model/model.h"

namespace brigade {

struct CnnConfig {
  int64_t height = 28, width = 28;          // input image
  int64_t in_channels = 1;                  // examples are (in_channels, height, width)
  std::vector<int64_t> channels = {6, 16};  // output channels of each conv stage (>= 1 stage)
  int64_t kernel = 5;                       // conv kernel side; no padding, stride 1
  int64_t pool = 2;                         // max-pool window side and stride
  std::vector<int64_t> hidden = {120, 84};  // widths of the linear layers after the flatten
  int64_t classes = 10;
  // Throws ConfigError naming the field when a value is out of range, or when the stages
  // shrink the image below one pixel.
  void validate() const;
};

// 6 x (multiply-adds of the weights + bias adds) per example, summed over the layers: every
// output element of a layer costs fan_in + 1 of them in forward, twice that in backward (data
// and weight gradients), at 2 flops each. As for the MLP, the first layer's data gradient,
// which is never computed, is counted too (the usual 6N convention, with N per output).
double cnn_flops_per_example(const CnnConfig& config);

class CnnClassifier : public Model {
 public:
  // Layout in forward order: conv.{i}.weight (channels[i], in, kernel, kernel), conv.{i}.bias,
  // fc.{j}.weight (hidden[j], fan_in), fc.{j}.bias, head.weight (classes, fan_in), head.bias.
  // Initialisation as PyTorch's Conv2d and Linear: weights and biases uniform in
  // [-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in * kernel^2 or the input width. Allocates
  // every activation and scratch buffer for max_batch examples.
  CnnClassifier(const CnnConfig& config, int64_t max_batch);

  const CnnConfig& config() const { return config_; }
  int64_t max_batch() const override { return max_batch_; }

  // batch.features holds (batch.size, in_channels, height, width) values, batch.targets
  // batch.size labels in [0, classes) or < 0 (ignored). Returns the mean cross-entropy over
  // the valid labels.
  float forward(const Batch& batch) override;

  // Backward of the last forward (one per forward). Reports head first, then fc.{n-1} .. fc.0,
  // then conv.{n-1} .. conv.0.
  void backward(const Batch& batch, float loss_scale) override;

  int64_t correct_predictions() const override { return head_.correct(); }

  // Logits (batch.size, classes) of the last forward; backward overwrites them in place.
  const float* logits() const { return head_.logits(); }

  double flops_per_example() const override { return cnn_flops_per_example(config_); }

 private:
  struct ConvStage {
    Conv2dShape conv;  // N = max_batch; each call uses the batch's size
    Pool2dShape pool;
    int64_t weight, bias;  // offsets in the flat buffer
  };
  struct Linear {
    int64_t in, out, weight, bias;
  };

  CnnConfig config_;
  int64_t max_batch_;
  std::vector<ConvStage> stages_;
  std::vector<Linear> linears_;  // hidden layers, then the head
  // Per stage, for max_batch: im2col of its input (kept for the weight gradient), the pooled
  // output after the in-place ReLU and where each maximum came from.
  std::vector<std::vector<float>> col_, pooled_;
  std::vector<std::vector<int32_t>> argmax_;
  // Conv scratch, the largest stage's: the output before pooling, the GEMM's product, dcol.
  std::vector<float> conv_out_, conv_tmp_, dcol_;
  std::vector<std::vector<float>> hidden_;       // per hidden layer: (B, out) after ReLU
  ClassifierHead head_;                          // the head layer, the loss and its gradient
  std::vector<float> dact_a_, dact_b_, dact_c_;  // (B, widest activation): gradients
};

}  // namespace brigade
