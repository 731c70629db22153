// Datasets and loaders: windows and labels copied exactly, buffers reused without allocation,
// DP ranks together covering the single-process batch, and the fixed-order eval iterator.
#include "brigade/data/loader.h"

#include <gtest/gtest.h>

#include <numeric>

#include "brigade/base/error.h"

namespace brigade {
namespace {

std::vector<int32_t> counting_tokens(int64_t n) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7 + 3) % 1000);
  return t;
}

TEST(TokenDataset, WindowsAndShiftedTargets) {
  const auto tokens = counting_tokens(103);
  TokenDataset ds(tokens, 8);
  EXPECT_EQ(ds.size(), (103 - 1) / 8);  // 12 windows; the 7-token tail is unused
  Batch b = ds.make_batch(4);
  const int64_t ids[3] = {11, 0, 5};
  ds.fill(b, ids, 3);
  EXPECT_EQ(b.size, 3);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < 8; ++t) {
      EXPECT_EQ(b.tokens[r * 8 + t], tokens[ids[r] * 8 + t]);
      EXPECT_EQ(b.targets[r * 8 + t], tokens[ids[r] * 8 + t + 1]);
    }
  }
  // The last window reads its final target from the token after it: exactly N*T + 1 needed.
  TokenDataset exact(counting_tokens(17), 8);
  EXPECT_EQ(exact.size(), 2);
  EXPECT_THROW(TokenDataset(counting_tokens(8), 8), ConfigError);
  EXPECT_THROW(TokenDataset(counting_tokens(100), 0), ConfigError);
}

TEST(Loader, FillReusesTheBuffers) {
  TokenDataset ds(counting_tokens(1000), 16);
  DataLoader loader(ds, {.seed = 3, .micro_batch = 4, .grad_accum = 2});
  Batch b = loader.make_batch();
  const int32_t* tokens = b.tokens.data();
  const int32_t* targets = b.targets.data();
  const size_t cap = b.tokens.capacity();
  for (int64_t step = 0; step < 20; ++step) {
    for (int64_t j = 0; j < 2; ++j) loader.next(b, step, j);
  }
  EXPECT_EQ(b.tokens.data(), tokens);
  EXPECT_EQ(b.targets.data(), targets);
  EXPECT_EQ(b.tokens.capacity(), cap);
  EXPECT_EQ(b.size, 4);
}

TEST(ImageDataset, CopiesFeaturesAndLabels) {
  const int64_t n = 10, dim = 5;
  std::vector<float> features(n * dim);
  std::iota(features.begin(), features.end(), 0.0f);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(9 - i);
  ImageDataset ds(features, labels, dim);
  EXPECT_EQ(ds.size(), n);
  Batch b = ds.make_batch(3);
  const int64_t ids[2] = {7, 2};
  ds.fill(b, ids, 2);
  EXPECT_EQ(b.size, 2);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(b.targets[r], 9 - ids[r]);
    for (int64_t d = 0; d < dim; ++d) EXPECT_EQ(b.features[r * dim + d], ids[r] * dim + d);
  }
  EXPECT_THROW(ImageDataset(features, labels, 4), ConfigError);
  EXPECT_THROW(ImageDataset({}, {}, 5), ConfigError);
}

TEST(Loader, DpRanksTogetherSeeTheSingleProcessBatch) {
  // Token dataset, G = 8: one process with mb 8 vs 4 ranks with mb 1, accum 2.
  TokenDataset ds(counting_tokens(50 * 6 + 1), 6);
  DataLoader single(ds, {.seed = 9, .micro_batch = 8});
  Batch whole = single.make_batch();
  std::vector<DataLoader> ranks;
  for (int64_t r = 0; r < 4; ++r) {
    ranks.emplace_back(
        ds,
        SamplerOptions{.seed = 9, .micro_batch = 1, .grad_accum = 2, .dp_size = 4, .dp_rank = r});
  }
  Batch one = ranks[0].make_batch();
  for (int64_t step = 0; step < 12; ++step) {
    single.next(whole, step, 0);
    std::vector<int32_t> concat;
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t r = 0; r < 4; ++r) {
        ranks[r].next(one, step, j);
        concat.insert(concat.end(), one.tokens.begin(), one.tokens.end());
      }
    }
    EXPECT_EQ(concat, whole.tokens) << "step " << step;
  }
}

TEST(EvalIterator, FixedOrderFirstKBatches) {
  TokenDataset ds(counting_tokens(10 * 4 + 1), 4);  // 10 examples
  EvalIterator all(ds, 3, 0);
  EXPECT_EQ(all.num_batches(), 4);  // 3 + 3 + 3 + 1
  Batch b = all.make_batch();
  int64_t expected_first = 0;
  int64_t batches = 0;
  while (all.next(b)) {
    const int64_t want = std::min<int64_t>(3, 10 - expected_first);
    ASSERT_EQ(b.size, want);
    for (int64_t r = 0; r < want; ++r) {
      EXPECT_EQ(b.tokens[r * 4], ds.tokens()[(expected_first + r) * 4]);
    }
    expected_first += want;
    ++batches;
  }
  EXPECT_EQ(batches, 4);
  EXPECT_EQ(expected_first, 10);

  EvalIterator first_two(ds, 3, 2);
  EXPECT_EQ(first_two.num_batches(), 2);
  Batch c = first_two.make_batch();
  first_two.fill(c, 1);
  EXPECT_EQ(c.size, 3);
  EXPECT_EQ(c.tokens[0], ds.tokens()[3 * 4]);
  // Repeatable: reset and iterate again gives the same batches.
  first_two.reset();
  ASSERT_TRUE(first_two.next(c));
  ASSERT_TRUE(first_two.next(c));
  EXPECT_EQ(c.tokens[0], ds.tokens()[3 * 4]);
  EXPECT_FALSE(first_two.next(c));
  EXPECT_EQ(EvalIterator(ds, 3, 100).num_batches(), 4);
  EXPECT_THROW(EvalIterator(ds, 0, 1), ConfigError);
}

}  // namespace
}  // namespace brigade
