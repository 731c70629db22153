// CNN classifier: gradients of every tensor against finite differences, the NIID-Bench layout
// (names, shapes, 44,426 parameters) and PyTorch's uniform initialisation, FLOPs, the grad-ready
// ranges, the accuracy counter, batches smaller than the buffers, and SGD steps that lower the
// loss.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/model/cnn_classifier.h"
#include "brigade/monitor/op_profiler.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

// A CNN small enough for finite differences: 12x10x2 images, two stages (conv 3x3, pool 2:
// 12x10 -> 10x8 -> 5x4, then 3x2 -> 1x1), one hidden layer.
const CnnConfig kSmall{.height = 12,
                       .width = 10,
                       .in_channels = 2,
                       .channels = {3, 4},
                       .kernel = 3,
                       .pool = 2,
                       .hidden = {5},
                       .classes = 3};

// ReLU and max-pooling are piecewise linear: a central difference whose step moves some
// pre-activation across 0 (or swaps a window's maximum) misses part of the slope. A first-layer
// weight moves hundreds of pre-activations by eps x input, so the MLP tests' eps = 1e-2 crosses
// several kinks (a 9% error seen on conv.0.weight[0]); 2e-3 crosses almost none, and float
// rounding of the loss (~1e-7 / 2 eps = 2.5e-5) stays far below atol.
constexpr float kEps = 2e-3f;

Batch make_batch(const CnnConfig& c, int64_t size, uint64_t seed) {
  const int64_t D = c.in_channels * c.height * c.width;
  Batch b;
  b.size = size;
  b.features.resize(static_cast<size_t>(size * D));
  fill_normal(b.features.data(), size * D, 0.0f, 1.0f, seed, hash_name("features"));
  for (int64_t i = 0; i < size; ++i)
    b.targets.push_back(
        static_cast<int32_t>(random_uniform(seed, hash_name("labels"), static_cast<uint64_t>(i)) *
                             static_cast<float>(c.classes)));
  return b;
}

std::vector<float> grads_of(const Model& m) {
  return std::vector<float>(m.grads(), m.grads() + m.num_params());
}

TEST(CnnGrad, MatchesFiniteDifferencesForEveryTensor) {
  CnnClassifier model(kSmall, 4);
  model.initialize(1);
  testing::perturb_params(model, 0.1f, 2);
  Batch batch = make_batch(kSmall, 4, 3);
  batch.targets[2] = -1;  // ignored label: no loss, no gradient
  const int checked = testing::check_gradients(
      model, batch, {.eps = kEps, .atol = 1e-3f, .rtol = 2e-2f, .per_tensor = 6});
  EXPECT_GE(checked, 10 * 2);
}

TEST(CnnGrad, ConvStagesStraightToTheOutputLayer) {
  CnnConfig c = kSmall;
  c.channels = {3};  // one stage: 12x10 -> 5x4, flattened to 60
  c.hidden = {};
  CnnClassifier model(c, 3);
  model.initialize(4);
  ASSERT_EQ(model.layout().specs().size(), 4u);
  EXPECT_EQ(model.layout().specs()[2].name, "head.weight");
  EXPECT_EQ(model.layout().specs()[2].shape, (std::vector<int64_t>{3, 3 * 5 * 4}));
  testing::perturb_params(model, 0.1f, 5);
  testing::check_gradients(model, make_batch(c, 3, 6), {.eps = kEps, .per_tensor = 6});
}

TEST(CnnGrad, NiidBenchLayoutNamesShapesAndCount) {
  const CnnConfig c;  // the defaults are NIID-Bench's CNN
  CnnClassifier model(c, 1);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"conv.0.weight", {6, 1, 5, 5}},  {"conv.0.bias", {6}},
      {"conv.1.weight", {16, 6, 5, 5}}, {"conv.1.bias", {16}},
      {"fc.0.weight", {120, 256}},      {"fc.0.bias", {120}},
      {"fc.1.weight", {84, 120}},       {"fc.1.bias", {84}},
      {"head.weight", {10, 84}},        {"head.bias", {10}}};
  const auto& specs = model.layout().specs();
  ASSERT_EQ(specs.size(), want.size());
  int64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(specs[i].name, want[i].first);
    EXPECT_EQ(specs[i].shape, want[i].second);
    EXPECT_EQ(specs[i].offset, offset);
    EXPECT_EQ(specs[i].weight_decay, specs[i].shape.size() > 1);  // weights, not biases
    offset += specs[i].numel;
  }
  // 156 + 2,416 + 30,840 + 10,164 + 850.
  EXPECT_EQ(model.num_params(), 44426);
}

TEST(CnnGrad, InitialisationIsPyTorchsUniform) {
  CnnClassifier model(CnnConfig{}, 1);
  model.initialize(7);
  // fan_in per layer: weights and biases share the layer's bound 1/sqrt(fan_in).
  const std::vector<std::pair<std::string, int64_t>> fan_in = {
      {"conv.0", 25}, {"conv.1", 150}, {"fc.0", 256}, {"fc.1", 120}, {"head", 84}};
  for (const auto& [layer, fan] : fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan));
    for (const char* part : {".weight", ".bias"}) {
      const ParamSpec& spec = model.layout().at(layer + part);
      SCOPED_TRACE(spec.name);
      double sq = 0.0;
      int64_t outside = 0;
      for (int64_t i = 0; i < spec.numel; ++i) {
        const double v = model.params()[spec.offset + i];
        outside += v < -bound || v >= bound;
        sq += v * v;
      }
      EXPECT_EQ(outside, 0);
      // U(-b, b) has second moment b^2 / 3; the tensors of >= 1,000 values pin it to a few %.
      if (spec.numel >= 1000) {
        EXPECT_NEAR(std::sqrt(sq / static_cast<double>(spec.numel)), bound / std::sqrt(3.0),
                    0.05 * bound / std::sqrt(3.0));
      }
    }
  }
  // Different tensors draw from different streams.
  EXPECT_NE(model.params()[model.layout().at("fc.0.weight").offset],
            model.params()[model.layout().at("fc.1.weight").offset]);
}

TEST(CnnGrad, FlopsPerExampleCountEveryOutputPosition) {
  // 6 x (outputs x (fan_in + 1)) per layer: conv.0 6*24*24 x 26, conv.1 16*8*8 x 151, then the
  // linear layers' weights and biases.
  const double macs = 6 * 24 * 24 * 26.0 + 16 * 8 * 8 * 151.0 + 30840 + 10164 + 850;
  CnnClassifier model(CnnConfig{}, 1);
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 6 * macs);
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 1718004.0);
  EXPECT_DOUBLE_EQ(cnn_flops_per_example(CnnConfig{}), 1718004.0);
}

TEST(CnnGrad, GradReadyCoversEveryTensorOnceFromTheEnd) {
  CnnClassifier model(kSmall, 2);
  model.initialize(8);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  model.set_grad_ready_hook([&](int64_t offset, int64_t count) {
    // Final when reported: the gradient of that range is already in grads().
    ranges.emplace_back(offset, count);
  });
  const Batch batch = make_batch(kSmall, 2, 9);
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  // head, fc.0, conv.1, conv.0: each layer's weight and bias together, last layer first.
  ASSERT_EQ(ranges.size(), 4u);
  int64_t end = model.num_params();
  for (const auto& [offset, count] : ranges) {
    EXPECT_EQ(offset + count, end);
    end = offset;
  }
  EXPECT_EQ(end, 0);
}

TEST(CnnGrad, BackwardAccumulatesWithLossScale) {
  CnnClassifier model(kSmall, 3);
  model.initialize(10);
  const Batch batch = make_batch(kSmall, 3, 11);
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  const std::vector<float> once = grads_of(model);
  // Two micro-steps at loss_scale 1/2 sum to the same gradient.
  model.zero_grads();
  for (int k = 0; k < 2; ++k) {
    model.forward(batch);
    model.backward(batch, 0.5f);
  }
  const std::vector<float> twice = grads_of(model);
  for (size_t i = 0; i < once.size(); ++i) ASSERT_NEAR(twice[i], once[i], 1e-6f) << i;
}

TEST(CnnGrad, SmallerBatchThanTheBuffersGivesTheSameResult) {
  CnnClassifier big(kSmall, 8), exact(kSmall, 3);
  big.initialize(12);
  exact.initialize(12);
  const Batch batch = make_batch(kSmall, 3, 13);
  for (CnnClassifier* m : {&big, &exact}) {
    m->zero_grads();
    m->forward(batch);
    m->backward(batch, 1.0f);
  }
  EXPECT_EQ(big.forward(batch), exact.forward(batch));
  EXPECT_EQ(grads_of(big), grads_of(exact));
}

TEST(CnnGrad, CorrectPredictionsCountsArgmaxMatches) {
  const CnnConfig c;
  CnnClassifier model(c, 64);
  model.initialize(14);
  Batch batch = make_batch(c, 64, 15);
  batch.targets[5] = -1;  // ignored: never counted
  model.forward(batch);
  int64_t want = 0;
  for (int64_t n = 0; n < 64; ++n) {
    const float* row = model.logits() + n * c.classes;
    int best = 0;
    for (int k = 1; k < c.classes; ++k)
      if (row[k] > row[best]) best = k;
    want += batch.targets[static_cast<size_t>(n)] >= 0 && best == batch.targets[n];
  }
  EXPECT_EQ(model.correct_predictions(), want);
  EXPECT_GT(want, 0);  // random labels, 10 classes: ~6 expected
}

TEST(CnnGrad, InitialLossIsNearLogClasses) {
  // PyTorch's init keeps the logits small (|logit| ~ 0.1 here), so softmax is near uniform.
  const CnnConfig c;
  CnnClassifier model(c, 128);
  model.initialize(16);
  EXPECT_NEAR(model.forward(make_batch(c, 128, 17)), std::log(10.0), 0.1);
}

TEST(CnnGrad, SgdStepsOnOneBatchLowerTheLoss) {
  const CnnConfig c;
  CnnClassifier model(c, 16);
  model.initialize(18);
  const Batch batch = make_batch(c, 16, 19);
  float first = 0.0f, loss = 0.0f;
  for (int step = 0; step < 100; ++step) {
    model.zero_grads();
    loss = model.forward(batch);
    if (step == 0) first = loss;
    model.backward(batch, 1.0f);
    for (int64_t i = 0; i < model.num_params(); ++i) model.params()[i] -= 0.1f * model.grads()[i];
  }
  // 16 random images with random labels: plain SGD memorises them (2.29 -> 0.02 here; the
  // loss falls slowly for ~50 steps, while the small PyTorch-initialised weights grow).
  EXPECT_LT(loss, 0.25f * first) << "first " << first << " last " << loss;
}

TEST(CnnGrad, ProfilerCountsEveryKernelCall) {
  CnnClassifier model(kSmall, 2);
  model.initialize(20);
  const Batch batch = make_batch(kSmall, 2, 21);
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  const std::vector<float> plain = grads_of(model);
  OpProfiler prof;
  model.set_profiler(&prof);
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  EXPECT_EQ(grads_of(model), plain);  // timing does not change the arithmetic
  // S = 2 stages, H = 1 hidden layer: conv, ReLU, pool per stage; matmul and ReLU per hidden
  // layer, the head's matmul. Backward zeroes each linear layer's input gradient, each hidden
  // layer's pre-ReLU gradient, each stage's two activation gradients and the input gradients
  // of every stage but the first.
  const int64_t S = 2, H = 1;
  const std::vector<std::pair<Op, int64_t>> want = {{Op::kConv2dForward, S},
                                                    {Op::kConv2dBackward, S},
                                                    {Op::kReluForward, S + H},
                                                    {Op::kReluBackward, S + H},
                                                    {Op::kMaxPoolForward, S},
                                                    {Op::kMaxPoolBackward, S},
                                                    {Op::kMatmulForward, H + 1},
                                                    {Op::kMatmulBackward, H + 1},
                                                    {Op::kCrossentropyForward, 1},
                                                    {Op::kCrossentropyBackward, 1},
                                                    {Op::kZeroFill, (H + 1) + H + 2 * S + (S - 1)}};
  int64_t total = 0;
  for (const auto& [op, calls] : want) {
    EXPECT_EQ(prof.calls(op), calls) << op_name(op);
    total += calls;
  }
  int64_t recorded = 0;
  for (const OpRow& r : prof.report()) recorded += r.calls;
  EXPECT_EQ(recorded, total);  // nothing else
}

std::string error_of(const CnnConfig& c, int64_t max_batch = 1) {
  try {
    CnnClassifier model(c, max_batch);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CnnGrad, ConfigErrorsNameTheField) {
  CnnConfig c;
  c.channels = {6, 16, 32};  // 28 -> 12 -> 4: nothing left for a third 5x5 conv
  EXPECT_NE(error_of(c).find("model.channels has 3 conv stages: stage 2 gets a 4x4 image"),
            std::string::npos)
      << error_of(c);
  c.channels = {};
  EXPECT_NE(error_of(c).find("model.channels = []"), std::string::npos) << error_of(c);
  c.channels = {6, 0};
  EXPECT_NE(error_of(c).find("model.channels[1] = 0"), std::string::npos) << error_of(c);
  c.channels = {6, 16};
  c.hidden = {120, -1};
  EXPECT_NE(error_of(c).find("model.hidden[1] = -1"), std::string::npos) << error_of(c);
  EXPECT_NE(error_of(CnnConfig{}, 0).find("micro-batch size = 0"), std::string::npos);
}

}  // namespace
}  // namespace brigade
