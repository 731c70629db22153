// MLP classifier forward and backward over the CPU kernels. Forward keeps each hidden
// layer's pre- and post-GELU activations; backward ping-pongs between two scratch buffers
// (the gradient w.r.t. a layer's output, then w.r.t. its pre-activation) as it walks the
// layers in reverse.
#include "brigade/model/mlp_classifier.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

void MlpConfig::validate() const {
  auto positive = [](const std::string& key, int64_t value) {
    if (value <= 0)
      throw ConfigError("model." + key + " = " + std::to_string(value) + ": must be > 0");
  };
  positive("input", input);
  for (size_t i = 0; i < hidden.size(); ++i)
    positive("hidden[" + std::to_string(i) + "]", hidden[i]);
  positive("classes", classes);
}

MlpClassifier::MlpClassifier(const MlpConfig& config, int64_t max_batch)
    : config_(config), max_batch_(max_batch), head_(max_batch, config.classes) {
  config_.validate();
  if (max_batch <= 0)
    throw ConfigError("micro-batch size = " + std::to_string(max_batch) + ": must be > 0");

  auto add_linear = [&](const std::string& prefix, int64_t in, int64_t out) {
    Layer layer{.in = in, .out = out, .weight = 0, .bias = 0};
    layer.weight = layout_.add({.name = prefix + ".weight",
                                .shape = {out, in},
                                .init = Init::kNormal,
                                .init_std = 1.0f / std::sqrt(static_cast<float>(in)),
                                .weight_decay = true});
    layer.bias = layout_.add({.name = prefix + ".bias",
                              .shape = {out},
                              .init = Init::kZeros,
                              .init_std = 0.0f,
                              .weight_decay = false});
    layers_.push_back(layer);
  };
  int64_t width = config_.input, widest = config_.classes;
  for (size_t i = 0; i < config_.hidden.size(); ++i) {
    add_linear("fc." + std::to_string(i), width, config_.hidden[i]);
    width = config_.hidden[i];
    widest = std::max(widest, width);
  }
  add_linear("head", width, config_.classes);
  allocate_params();

  const auto B = static_cast<size_t>(max_batch_);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    pre_.emplace_back(B * static_cast<size_t>(layers_[i].out));
    post_.emplace_back(B * static_cast<size_t>(layers_[i].out));
  }
  dact_a_.resize(B * static_cast<size_t>(widest));
  dact_b_.resize(B * static_cast<size_t>(widest));
}

float MlpClassifier::forward(const Batch& batch) {
  const int64_t B = batch.size;
  BRIGADE_CHECK(B > 0 && B <= max_batch_) << "batch.size " << B << " max_batch " << max_batch_;
  BRIGADE_CHECK(static_cast<int64_t>(batch.features.size()) >= B * config_.input)
      << "features " << batch.features.size() << " < " << B << " x " << config_.input;
  BRIGADE_CHECK(static_cast<int64_t>(batch.targets.size()) >= B)
      << "targets " << batch.targets.size() << " < " << B;
  const float* p = params();

  const float* x = batch.features.data();
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    timed(profiler_, Op::kMatmulForward, matmul_forward, pre_[i].data(), x, p + layer.weight,
          p + layer.bias, B, layer.in, layer.out);
    timed(profiler_, Op::kGeluForward, gelu_forward, post_[i].data(), pre_[i].data(),
          B * layer.out);
    x = post_[i].data();
  }
  const Layer& head = layers_.back();
  return head_.forward(profiler_, x, p + head.weight, p + head.bias, batch.targets.data(), B,
                       head.in);
}

void MlpClassifier::backward(const Batch& batch, float loss_scale) {
  const int64_t B = batch.size;
  const float* p = params();
  float* g = grads();
  const float* dlogits = head_.backward(profiler_, batch.targets.data(), loss_scale, B);
  // dout: gradient w.r.t. the current layer's output; dinp: w.r.t. its input.
  const float* dout = dlogits;
  float* dpost = dact_a_.data();
  float* dpre = dact_b_.data();
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    const float* inp = i == 0 ? batch.features.data() : post_[i - 1].data();
    // The first layer's input is data: no gradient needed.
    float* dinp = i == 0 ? nullptr : dpost;
    if (dinp) {
      ScopedOp scope(profiler_, Op::kZeroFill);
      std::fill(dinp, dinp + B * layer.in, 0.0f);
    }
    timed(profiler_, Op::kMatmulBackward, matmul_backward, dinp, g + layer.weight, g + layer.bias,
          dout, inp, p + layer.weight, B, layer.in, layer.out);
    grad_ready(layer.weight, layer.out * layer.in + layer.out);
    if (i == 0) break;
    {
      ScopedOp scope(profiler_, Op::kZeroFill);
      std::fill(dpre, dpre + B * layer.in, 0.0f);
    }
    timed(profiler_, Op::kGeluBackward, gelu_backward, dpre, pre_[i - 1].data(), dpost,
          B * layer.in);
    dout = dpre;  // dpost is free again for the next layer's input gradient
  }
}

double MlpClassifier::flops_per_example() const {
  return 6.0 * static_cast<double>(layout_.total());
}

}  // namespace brigade
