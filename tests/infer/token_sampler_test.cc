// TokenSampler against its definition, computed here independently: greedy is the arg max (ties
// to the lower id); draws follow softmax(logits / temperature) renormalised over the top-k ids and
// then over the nucleus (the most likely ids until their probability reaches top_p), within a
// binomial 5-sigma band over 40,000 draws; ids at or above `decodable` are never drawn; the same
// (seed, stream, index) gives the same token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/infer/sampler.h"

namespace brigade {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, 0.0f, 3.0f, -1.0f, 2.0f, 10.0f};

// P(id) by the definition, over the first `decodable` ids.
std::vector<double> expected(double temperature, int64_t top_k, double top_p, int64_t decodable) {
  std::vector<int> ids(static_cast<size_t>(decodable));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [](int a, int b) { return kLogits[a] > kLogits[b]; });
  if (top_k > 0) ids.resize(static_cast<size_t>(std::min<int64_t>(top_k, decodable)));
  std::vector<double> w;
  double total = 0;
  for (int id : ids) {
    w.push_back(std::exp(kLogits[static_cast<size_t>(id)] / temperature));
    total += w.back();
  }
  size_t keep = ids.size();
  double acc = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    acc += w[i];
    if (acc >= top_p * total) {
      keep = i + 1;
      break;
    }
  }
  std::vector<double> p(kLogits.size(), 0.0);
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += w[i];
  for (size_t i = 0; i < keep; ++i) p[static_cast<size_t>(ids[i])] = w[i] / kept;
  return p;
}

void expect_distribution(double temperature, int64_t top_k, double top_p, int64_t decodable) {
  TokenSampler sampler({.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = 9},
                       decodable);
  const int n = 40000;
  std::vector<double> counts(kLogits.size(), 0.0);
  for (int i = 0; i < n; ++i)
    counts[static_cast<size_t>(sampler.sample(kLogits.data(), 1, i))] += 1;
  const std::vector<double> p = expected(temperature, top_k, top_p, decodable);
  for (size_t id = 0; id < p.size(); ++id) {
    const double sigma = std::sqrt(n * p[id] * (1 - p[id]));
    EXPECT_NEAR(counts[id], n * p[id], 5 * sigma + 1e-9)
        << "id " << id << " T " << temperature << " k " << top_k << " p " << top_p;
  }
}

TEST(TokenSampler, GreedyIsTheArgMaxWithTiesToTheLowerId) {
  TokenSampler all({.temperature = 0}, 8);
  EXPECT_EQ(all.sample(kLogits.data(), 0, 0), 7);
  TokenSampler first7({.temperature = 0}, 7);  // id 7 not decodable: the tie 1 vs 4 goes to 1
  EXPECT_EQ(first7.sample(kLogits.data(), 0, 0), 1);
}

TEST(TokenSampler, DrawsFollowTheTruncatedSoftmax) {
  expect_distribution(1.0, 0, 1.0, 7);
  expect_distribution(2.0, 3, 1.0, 7);
  expect_distribution(1.5, 0, 0.7, 7);
  expect_distribution(0.7, 4, 0.9, 8);
  expect_distribution(1.0, 0, 1e-6, 8);  // the nucleus keeps at least the top id
}

TEST(TokenSampler, DrawsAreAFunctionOfSeedStreamAndIndex) {
  TokenSampler a({.temperature = 3.0, .top_k = 0, .seed = 4}, 8);
  TokenSampler b({.temperature = 3.0, .top_k = 0, .seed = 4}, 8);
  int differ = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(a.sample(kLogits.data(), 5, i), b.sample(kLogits.data(), 5, i));
    differ += a.sample(kLogits.data(), 5, i) != a.sample(kLogits.data(), 6, i);
  }
  EXPECT_GT(differ, 20);  // another stream is another sequence of draws
}

TEST(TokenSampler, RefusesOptionsOutOfRange) {
  EXPECT_THROW(validate({.temperature = -1}), ConfigError);
  EXPECT_THROW(validate({.top_k = -2}), ConfigError);
  EXPECT_THROW(validate({.top_p = 0}), ConfigError);
  EXPECT_THROW(validate({.top_p = 1.5}), ConfigError);
}

}  // namespace
}  // namespace brigade
