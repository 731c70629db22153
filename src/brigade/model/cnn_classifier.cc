// CNN classifier forward and backward over the CPU kernels. Forward keeps, per conv stage, the
// im2col matrix (for the weight gradient), the pooled output after ReLU (in place: ReLU's
// backward needs only its output) and the pooling argmax; the conv output itself is scratch,
// since the pooling backward needs only the argmax. Backward rotates three scratch buffers
// through each stage: the stage output's gradient, the pooled value's before ReLU, the conv
// output's; the conv backward then writes the previous stage's output gradient into the first.
#include "brigade/model/cnn_classifier.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/relu.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

namespace {

void positive(const std::string& key, int64_t value) {
  if (value <= 0)
    throw ConfigError("model." + key + " = " + std::to_string(value) + ": must be > 0");
}

// Output side of one stage (valid conv, then floor-mode pooling) for an input side; <= 0 when
// the image is too small for it.
int64_t stage_side(int64_t side, int64_t kernel, int64_t pool) {
  const int64_t conv = side - kernel + 1;
  return conv < pool ? 0 : (conv - pool) / pool + 1;
}

void zero(OpProfiler* profiler, float* p, int64_t n) {
  ScopedOp scope(profiler, Op::kZeroFill);
  std::fill(p, p + n, 0.0f);
}

}  // namespace

void CnnConfig::validate() const {
  positive("height", height);
  positive("width", width);
  positive("in_channels", in_channels);
  if (channels.empty()) throw ConfigError("model.channels = []: needs at least one conv stage");
  for (size_t i = 0; i < channels.size(); ++i)
    positive("channels[" + std::to_string(i) + "]", channels[i]);
  positive("kernel", kernel);
  positive("pool", pool);
  for (size_t i = 0; i < hidden.size(); ++i)
    positive("hidden[" + std::to_string(i) + "]", hidden[i]);
  positive("classes", classes);
  int64_t h = height, w = width;
  for (size_t i = 0; i < channels.size(); ++i) {
    const int64_t next_h = stage_side(h, kernel, pool), next_w = stage_side(w, kernel, pool);
    if (next_h <= 0 || next_w <= 0) {
      throw ConfigError("model.channels has " + std::to_string(channels.size()) +
                        " conv stages: stage " + std::to_string(i) + " gets a " +
                        std::to_string(h) + "x" + std::to_string(w) + " image, too small for a " +
                        std::to_string(kernel) + "x" + std::to_string(kernel) + " conv and a " +
                        std::to_string(pool) + "x" + std::to_string(pool) +
                        " pool; use fewer stages");
    }
    h = next_h;
    w = next_w;
  }
}

double cnn_flops_per_example(const CnnConfig& c) {
  double macs = 0.0;  // multiply-adds of weights and bias adds, forward
  int64_t h = c.height, w = c.width, in = c.in_channels;
  for (int64_t oc : c.channels) {
    const int64_t oh = h - c.kernel + 1, ow = w - c.kernel + 1;
    macs += static_cast<double>(oc * oh * ow) * static_cast<double>(in * c.kernel * c.kernel + 1);
    h = stage_side(h, c.kernel, c.pool);
    w = stage_side(w, c.kernel, c.pool);
    in = oc;
  }
  int64_t width = in * h * w;
  for (int64_t out : c.hidden) {
    macs += static_cast<double>(out) * static_cast<double>(width + 1);
    width = out;
  }
  macs += static_cast<double>(c.classes) * static_cast<double>(width + 1);
  return 6.0 * macs;
}

CnnClassifier::CnnClassifier(const CnnConfig& config, int64_t max_batch)
    : config_(config), max_batch_(max_batch), head_(max_batch, config.classes) {
  config_.validate();
  if (max_batch <= 0)
    throw ConfigError("micro-batch size = " + std::to_string(max_batch) + ": must be > 0");
  const CnnConfig& c = config_;

  // PyTorch's default: kaiming_uniform(a = sqrt(5)) for weights, which is 1/sqrt(fan_in), and
  // the same bound for biases.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, int64_t fan_in, bool decay) {
    return layout_.add({.name = name,
                        .shape = std::move(shape),
                        .init = Init::kUniform,
                        .init_bound = 1.0f / std::sqrt(static_cast<float>(fan_in)),
                        .weight_decay = decay});
  };
  int64_t h = c.height, w = c.width, in = c.in_channels;
  for (size_t i = 0; i < c.channels.size(); ++i) {
    const std::string prefix = "conv." + std::to_string(i);
    const int64_t oc = c.channels[i], fan_in = in * c.kernel * c.kernel;
    ConvStage stage;
    stage.conv = {
        .N = max_batch_, .C = in, .H = h, .W = w, .OC = oc, .KH = c.kernel, .KW = c.kernel};
    stage.pool = {.N = max_batch_,
                  .C = oc,
                  .H = stage.conv.out_h(),
                  .W = stage.conv.out_w(),
                  .window = c.pool,
                  .stride = c.pool};
    stage.weight = add(prefix + ".weight", {oc, in, c.kernel, c.kernel}, fan_in, true);
    stage.bias = add(prefix + ".bias", {oc}, fan_in, false);
    stages_.push_back(stage);
    h = stage.pool.out_h();
    w = stage.pool.out_w();
    in = oc;
  }
  auto add_linear = [&](const std::string& prefix, int64_t fan_in, int64_t out) {
    Linear l{.in = fan_in, .out = out, .weight = 0, .bias = 0};
    l.weight = add(prefix + ".weight", {out, fan_in}, fan_in, true);
    l.bias = add(prefix + ".bias", {out}, fan_in, false);
    linears_.push_back(l);
  };
  int64_t width = in * h * w;
  for (size_t j = 0; j < c.hidden.size(); ++j) {
    add_linear("fc." + std::to_string(j), width, c.hidden[j]);
    width = c.hidden[j];
  }
  add_linear("head", width, c.classes);
  allocate_params();

  const auto B = static_cast<size_t>(max_batch_);
  int64_t widest = linears_.front().in;  // per example, over every gradient buffer's use
  size_t tmp = 0, dcol = 0;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const ConvStage& s = stages_[i];
    col_.emplace_back(static_cast<size_t>(s.conv.col_numel()));
    pooled_.emplace_back(static_cast<size_t>(s.pool.out_numel()));
    argmax_.emplace_back(static_cast<size_t>(s.pool.out_numel()));
    tmp = std::max(tmp, static_cast<size_t>(s.conv.out_numel()));
    if (i > 0) dcol = std::max(dcol, static_cast<size_t>(s.conv.col_numel()));
    widest = std::max({widest, s.conv.out_numel() / max_batch_, s.conv.inp_numel() / max_batch_});
  }
  conv_out_.resize(tmp);
  conv_tmp_.resize(tmp);
  dcol_.resize(dcol);
  for (size_t j = 0; j + 1 < linears_.size(); ++j) {
    hidden_.emplace_back(B * static_cast<size_t>(linears_[j].out));
    widest = std::max(widest, linears_[j].out);
  }
  for (auto* buffer : {&dact_a_, &dact_b_, &dact_c_})
    buffer->resize(B * static_cast<size_t>(widest));
}

float CnnClassifier::forward(const Batch& batch) {
  const int64_t B = batch.size;
  BRIGADE_CHECK(B > 0 && B <= max_batch_) << "batch.size " << B << " max_batch " << max_batch_;
  const int64_t D = config_.in_channels * config_.height * config_.width;
  BRIGADE_CHECK(static_cast<int64_t>(batch.features.size()) >= B * D)
      << "features " << batch.features.size() << " < " << B << " x " << D;
  BRIGADE_CHECK(static_cast<int64_t>(batch.targets.size()) >= B)
      << "targets " << batch.targets.size() << " < " << B;
  const float* p = params();

  const float* x = batch.features.data();
  for (size_t i = 0; i < stages_.size(); ++i) {
    Conv2dShape conv = stages_[i].conv;
    Pool2dShape pool = stages_[i].pool;
    conv.N = pool.N = B;
    float* y = pooled_[i].data();
    timed(profiler_, Op::kConv2dForward, conv2d_forward, conv_out_.data(), col_[i].data(),
          conv_tmp_.data(), x, p + stages_[i].weight, p + stages_[i].bias, conv);
    timed(profiler_, Op::kMaxPoolForward, maxpool2d_forward, y, argmax_[i].data(), conv_out_.data(),
          pool);
    timed(profiler_, Op::kReluForward, relu_forward, y, y, pool.out_numel());
    x = y;
  }
  for (size_t j = 0; j + 1 < linears_.size(); ++j) {
    const Linear& l = linears_[j];
    float* y = hidden_[j].data();
    timed(profiler_, Op::kMatmulForward, matmul_forward, y, x, p + l.weight, p + l.bias, B, l.in,
          l.out);
    timed(profiler_, Op::kReluForward, relu_forward, y, y, B * l.out);
    x = y;
  }
  const Linear& head = linears_.back();
  return head_.forward(profiler_, x, p + head.weight, p + head.bias, batch.targets.data(), B,
                       head.in);
}

void CnnClassifier::backward(const Batch& batch, float loss_scale) {
  const int64_t B = batch.size;
  const float* p = params();
  float* g = grads();
  const float* dlogits = head_.backward(profiler_, batch.targets.data(), loss_scale, B);
  // The linear layers, as in the MLP: dout is the gradient w.r.t. the layer's output, dinp
  // (always a) w.r.t. its input, b the gradient before the ReLU that produced that input.
  const float* dout = dlogits;
  float* a = dact_a_.data();
  float* b = dact_b_.data();
  for (size_t j = linears_.size(); j-- > 0;) {
    const Linear& l = linears_[j];
    const float* inp = j == 0 ? pooled_.back().data() : hidden_[j - 1].data();
    zero(profiler_, a, B * l.in);
    timed(profiler_, Op::kMatmulBackward, matmul_backward, a, g + l.weight, g + l.bias, dout, inp,
          p + l.weight, B, l.in, l.out);
    grad_ready(l.weight, l.out * l.in + l.out);
    if (j == 0) break;
    zero(profiler_, b, B * l.in);
    timed(profiler_, Op::kReluBackward, relu_backward, b, hidden_[j - 1].data(), a, B * l.in);
    dout = b;
  }
  // a holds the gradient of the last stage's output (the flatten is a no-op in NCHW).
  for (size_t i = stages_.size(); i-- > 0;) {
    const ConvStage& s = stages_[i];
    Conv2dShape conv = s.conv;
    Pool2dShape pool = s.pool;
    conv.N = pool.N = B;
    zero(profiler_, b, pool.out_numel());
    timed(profiler_, Op::kReluBackward, relu_backward, b, pooled_[i].data(), a, pool.out_numel());
    float* dconv = dact_c_.data();
    zero(profiler_, dconv, conv.out_numel());
    timed(profiler_, Op::kMaxPoolBackward, maxpool2d_backward, dconv, b, argmax_[i].data(), pool);
    // The first stage's input is data: no gradient needed.
    float* dinp = i == 0 ? nullptr : a;
    if (dinp) zero(profiler_, dinp, conv.inp_numel());
    timed(profiler_, Op::kConv2dBackward, conv2d_backward, dinp, g + s.weight, g + s.bias, dconv,
          col_[i].data(), p + s.weight, conv_tmp_.data(), dinp ? dcol_.data() : nullptr, conv);
    grad_ready(s.weight, conv.weight_numel() + conv.OC);
  }
}

}  // namespace brigade
