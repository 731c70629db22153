// Balanced layer split against brute force over every split, and explicit splits validated.
#include "brigade/parallel/pipeline/layer_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "brigade/base/error.h"
#include "brigade/parallel/pipeline/mlp_stage.h"

namespace brigade {
namespace {

int64_t largest_stage(const std::vector<int64_t>& w, const std::vector<int>& split) {
  int64_t best = 0;
  size_t i = 0;
  for (int n : split) {
    int64_t sum = 0;
    for (int k = 0; k < n; ++k) sum += w[i++];
    best = std::max(best, sum);
  }
  return best;
}

// Smallest possible largest stage, over every split into `stages` non-empty runs.
int64_t brute_force(const std::vector<int64_t>& w, int stages) {
  int64_t best = INT64_MAX;
  std::vector<int> split;
  std::function<void(int, int)> rec = [&](int used, int left) {
    if (left == 1) {
      split.push_back(static_cast<int>(w.size()) - used);
      best = std::min(best, largest_stage(w, split));
      split.pop_back();
      return;
    }
    for (int n = 1; used + n + left - 1 <= static_cast<int>(w.size()); ++n) {
      split.push_back(n);
      rec(used + n, left - 1);
      split.pop_back();
    }
  };
  rec(0, stages);
  return best;
}

TEST(LayerPartition, BalancedSplitIsOptimal) {
  const std::vector<std::vector<int64_t>> models = {{5, 1, 1, 1, 1, 9, 2, 2},
                                                    {1, 1, 1, 1, 1, 1},
                                                    {100, 1, 1, 1},
                                                    {3, 8, 2, 7, 7, 1, 4},
                                                    mlp_layer_params({784, 256, 256, 128, 64, 10})};
  for (const auto& w : models) {
    for (int stages = 1; stages <= static_cast<int>(w.size()); ++stages) {
      const std::vector<int> split = balance_layers(w, stages);
      ASSERT_NO_THROW(validate_layer_split(split, stages, static_cast<int>(w.size())));
      EXPECT_EQ(largest_stage(w, split), brute_force(w, stages)) << stages << " stages";
    }
  }
}

TEST(LayerPartition, RejectsImpossibleSplits) {
  EXPECT_THROW(balance_layers({1, 2, 3}, 4), ConfigError);
  EXPECT_THROW(validate_layer_split({2, 0, 1}, 3, 3), ConfigError);
  EXPECT_THROW(validate_layer_split({2, 2}, 2, 3), ConfigError);
  EXPECT_THROW(validate_layer_split({3}, 2, 3), ConfigError);
  EXPECT_EQ(stage_boundaries({2, 1, 3}), (std::vector<int>{0, 2, 3, 6}));
}

}  // namespace
}  // namespace brigade
