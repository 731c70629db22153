// MLP classifier gradients against finite differences, the loss at initialisation and the
// accuracy counter against a naive argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "brigade/model/mlp_classifier.h"
#include "brigade/tensor/rng.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

Batch make_batch(const MlpConfig& c, int64_t size, uint64_t seed) {
  Batch b;
  b.size = size;
  b.features.resize(static_cast<size_t>(size * c.input));
  fill_normal(b.features.data(), size * c.input, 0.0f, 1.0f, seed, hash_name("features"));
  for (int64_t i = 0; i < size; ++i)
    b.targets.push_back(
        static_cast<int32_t>(random_uniform(seed, hash_name("labels"), static_cast<uint64_t>(i)) *
                             static_cast<float>(c.classes)));
  return b;
}

TEST(MlpGrad, MatchesFiniteDifferencesForEveryTensor) {
  const MlpConfig c{.input = 6, .hidden = {5, 4}, .classes = 3};
  MlpClassifier model(c, 4);
  model.initialize(1);
  testing::perturb_params(model, 0.2f, 2);
  Batch batch = make_batch(c, 4, 3);
  batch.targets[2] = -1;  // ignored label: no loss, no gradient
  const int checked = testing::check_gradients(
      model, batch, {.eps = 1e-2f, .atol = 1e-3f, .rtol = 2e-2f, .per_tensor = 4});
  EXPECT_GE(checked, 6 * 2);
}

TEST(MlpGrad, NoHiddenLayerIsSoftmaxRegression) {
  const MlpConfig c{.input = 5, .hidden = {}, .classes = 4};
  MlpClassifier model(c, 3);
  model.initialize(4);
  ASSERT_EQ(model.layout().specs().size(), 2u);
  EXPECT_EQ(model.layout().specs()[0].name, "head.weight");
  testing::check_gradients(model, make_batch(c, 3, 5), {});
}

TEST(MlpGrad, InitialLossIsNearLogClasses) {
  // 1/sqrt(fan_in) keeps each pre-activation at unit variance; GELU then halves the second
  // moment, so the logits have variance ~0.4 and the loss sits slightly above ln 10
  // (E[CE] ~ ln K + var/2 for small logits).
  const MlpConfig c;  // 784 -> 256 -> 128 -> 10
  MlpClassifier model(c, 256);
  model.initialize(6);
  const float loss = model.forward(make_batch(c, 256, 7));
  EXPECT_NEAR(loss, std::log(10.0), 0.35);
}

TEST(MlpGrad, CorrectPredictionsCountsArgmaxMatches) {
  const MlpConfig c{.input = 8, .hidden = {16}, .classes = 5};
  MlpClassifier model(c, 64);
  model.initialize(8);
  const Batch batch = make_batch(c, 64, 9);
  model.forward(batch);
  int64_t want = 0;
  for (int64_t n = 0; n < 64; ++n) {
    const float* row = model.logits() + n * 5;
    int best = 0;
    for (int k = 1; k < 5; ++k)
      if (row[k] > row[best]) best = k;
    want += best == batch.targets[static_cast<size_t>(n)];
  }
  EXPECT_EQ(model.correct_predictions(), want);
  EXPECT_GT(want, 0);  // random labels, 5 classes: ~13 expected
}

TEST(MlpGrad, LayoutNamesAndInit) {
  const MlpConfig c{.input = 300, .hidden = {200}, .classes = 10};
  MlpClassifier model(c, 1);
  model.initialize(10);
  const auto& specs = model.layout().specs();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].name, "fc.0.weight");
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{200, 300}));
  EXPECT_EQ(specs[1].name, "fc.0.bias");
  EXPECT_EQ(specs[2].name, "head.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{10, 200}));
  EXPECT_EQ(specs[3].name, "head.bias");
  EXPECT_TRUE(specs[0].weight_decay);
  EXPECT_FALSE(specs[1].weight_decay);
  double sq = 0.0;
  for (int64_t i = 0; i < specs[0].numel; ++i) sq += std::pow(model.params()[i], 2);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(specs[0].numel)), 1.0 / std::sqrt(300.0),
              0.03 / std::sqrt(300.0));
  for (int64_t i = 0; i < specs[1].numel; ++i) EXPECT_EQ(model.params()[specs[1].offset + i], 0.0f);
}

}  // namespace
}  // namespace brigade
