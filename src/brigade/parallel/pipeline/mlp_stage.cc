// MLP stage forward, split backward and weight gradients over the CPU kernels. Saved buffer of a
// micro-batch, per layer j of the stage: pre-activation (B, out), post-GELU (B, out) unless it is
// the stage's output (sent, not needed here), and the pre-activation gradient (B, out) that
// backward_input leaves for backward_weight; the head reuses its logits for their gradient (the
// cross-entropy backward writes in place) and adds its log-sum-exp (B).
#include "brigade/parallel/pipeline/mlp_stage.h"

#include <algorithm>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/matmul.h"

namespace brigade {

std::vector<int64_t> mlp_layer_params(const std::vector<int64_t>& widths) {
  std::vector<int64_t> out;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    out.push_back(widths[i] * widths[i + 1] + widths[i + 1]);
  return out;
}

MlpStage::MlpStage(const MlpStageConfig& c)
    : widths_(c.widths), first_(c.first_layer), end_(c.end_layer), B_(c.micro_batch) {
  const int n_layers = static_cast<int>(widths_.size()) - 1;
  if (n_layers < 1) throw ConfigError("MLP stage: widths needs at least input and classes");
  for (int64_t w : widths_) {
    if (w <= 0) throw ConfigError("MLP stage: every width must be > 0");
  }
  if (first_ < 0 || first_ >= end_ || end_ > n_layers)
    throw ConfigError("MLP stage: layers [" + std::to_string(first_) + ", " + std::to_string(end_) +
                      ") not a non-empty range of the " + std::to_string(n_layers) + " layers");
  if (B_ <= 0) throw ConfigError("MLP stage: micro_batch must be > 0");
  int64_t p = 0, widest = 0;
  for (int i = first_; i < end_; ++i) {
    Layer l{.in = widths_[i],
            .out = widths_[i + 1],
            .weight = p,
            .bias = 0,
            .pre = -1,
            .post = -1,
            .dpre = -1};
    p += l.in * l.out;
    l.bias = p;
    p += l.out;
    const bool head = i == n_layers - 1;
    l.pre = saved_floats_;
    saved_floats_ += B_ * l.out;
    if (!head && i != end_ - 1) {
      l.post = saved_floats_;
      saved_floats_ += B_ * l.out;
    }
    if (!head) {
      l.dpre = saved_floats_;
      saved_floats_ += B_ * l.out;
    } else {
      lse_ = saved_floats_;
      saved_floats_ += B_;
    }
    widest = std::max({widest, l.in, l.out});
    layers_.push_back(l);
  }
  params_.assign(static_cast<size_t>(p), 0.0f);
  grads_.assign(static_cast<size_t>(p), 0.0f);
  dx_.resize(static_cast<size_t>(B_ * widest));
  losses_.resize(static_cast<size_t>(B_));
}

void MlpStage::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
}

void MlpStage::set_batch(const float* features, const int32_t* targets, int micro_batches) {
  features_ = features;
  targets_ = targets;
  if (is_last()) {
    BRIGADE_CHECK(targets != nullptr) << "the last stage needs targets";
    int64_t valid = 0;
    for (int64_t n = 0; n < micro_batches * B_; ++n) valid += targets[n] >= 0;
    inv_valid_ = valid > 0 ? 1.0f / static_cast<float>(valid) : 0.0f;
  }
  if (is_first()) {
    BRIGADE_CHECK(features != nullptr) << "the first stage needs features";
  }
}

int64_t MlpStage::input_floats() const {
  return is_first() ? 0 : B_ * widths_[first_];
}

int64_t MlpStage::output_floats() const {
  return is_last() ? 0 : B_ * widths_[end_];
}

const float* MlpStage::layer_input(size_t j, int mb, const float* input, const float* saved) const {
  if (j > 0) return saved + layers_[j - 1].post;
  return is_first() ? features_ + mb * B_ * widths_[0] : input;
}

float MlpStage::forward(int mb, const float* input, float* output, float* saved) {
  const float* p = params_.data();
  float loss = 0.0f;
  for (size_t j = 0; j < layers_.size(); ++j) {
    const Layer& l = layers_[j];
    const float* x = layer_input(j, mb, input, saved);
    float* pre = saved + l.pre;
    matmul_forward(pre, x, p + l.weight, p + l.bias, B_, l.in, l.out);
    if (l.dpre < 0) {  // the head
      const int32_t* t = targets_ + mb * B_;
      crossentropy_forward(losses_.data(), saved + lse_, pre, t, B_, l.out);
      double sum = 0.0;
      for (int64_t n = 0; n < B_; ++n) {
        if (t[n] >= 0) sum += losses_[static_cast<size_t>(n)];
      }
      loss = static_cast<float>(sum) * inv_valid_;
    } else {
      float* post = l.post >= 0 ? saved + l.post : output;
      // Under recomputation the executor may pass no output for the stage's last layer.
      if (post != nullptr) gelu_forward(post, pre, B_ * l.out);
    }
  }
  return loss;
}

void MlpStage::backward_input(int mb, const float* /*input*/, const float* dout, float* dinput,
                              float* saved) {
  const float* p = params_.data();
  const float* g = dout;  // gradient w.r.t. the current layer's output
  for (size_t j = layers_.size(); j-- > 0;) {
    const Layer& l = layers_[j];
    float* dpre = nullptr;
    if (l.dpre < 0) {
      dpre = saved + l.pre;  // logits become their gradient in place
      crossentropy_backward(dpre, dpre, saved + lse_, targets_ + mb * B_, inv_valid_, B_, l.out);
    } else {
      BRIGADE_CHECK(g != nullptr) << "backward_input needs the output gradient";
      dpre = saved + l.dpre;
      std::fill(dpre, dpre + B_ * l.out, 0.0f);
      gelu_backward(dpre, saved + l.pre, g, B_ * l.out);
    }
    float* dx = j > 0 ? dx_.data() : dinput;  // g was consumed above, dx_ is free again
    if (dx != nullptr) {
      std::fill(dx, dx + B_ * l.in, 0.0f);
      matmul_backward(dx, nullptr, nullptr, dpre, nullptr, p + l.weight, B_, l.in, l.out);
    }
    g = dx;
  }
}

void MlpStage::backward_weight(int mb, const float* input, const float* saved) {
  const float* p = params_.data();
  float* gr = grads_.data();
  for (size_t j = 0; j < layers_.size(); ++j) {
    const Layer& l = layers_[j];
    const float* dpre = saved + (l.dpre < 0 ? l.pre : l.dpre);
    matmul_backward(nullptr, gr + l.weight, gr + l.bias, dpre, layer_input(j, mb, input, saved),
                    p + l.weight, B_, l.in, l.out);
  }
}

}  // namespace brigade
