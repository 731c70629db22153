// Balanced split by parameter count: the classic linear partition, solved exactly by binary
// search on the largest stage (a capacity is feasible when a greedy left-to-right fill needs at
// most `stages` runs), then a split that meets the best capacity with every stage non-empty.
#include "brigade/parallel/pipeline/layer_partition.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "brigade/base/error.h"

namespace brigade {

namespace {

// Fewest runs of consecutive layers, each at most cap parameters.
int runs_needed(const std::vector<int64_t>& w, int64_t cap) {
  int runs = 1;
  int64_t sum = 0;
  for (int64_t x : w) {
    if (sum + x > cap) {
      ++runs;
      sum = 0;
    }
    sum += x;
  }
  return runs;
}

}  // namespace

std::vector<int> balance_layers(const std::vector<int64_t>& w, int stages) {
  const int n = static_cast<int>(w.size());
  if (stages < 1)
    throw ConfigError("pipeline: " + std::to_string(stages) + " stages: must be >= 1");
  if (stages > n)
    throw ConfigError("pipeline: " + std::to_string(stages) + " stages but the model has only " +
                      std::to_string(n) + " layers; every stage needs at least one");
  int64_t lo = *std::max_element(w.begin(), w.end());
  int64_t hi = std::accumulate(w.begin(), w.end(), int64_t{0});
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (runs_needed(w, mid) <= stages) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // Fill from the back under the cap, leaving at least one layer for each earlier stage.
  std::vector<int> out(static_cast<size_t>(stages), 0);
  int end = n;
  for (int s = stages - 1; s >= 0; --s) {
    int begin = end - 1;
    int64_t sum = w[static_cast<size_t>(begin)];
    while (begin > s && sum + w[static_cast<size_t>(begin - 1)] <= lo) {
      --begin;
      sum += w[static_cast<size_t>(begin)];
    }
    if (s == 0) begin = 0;
    out[static_cast<size_t>(s)] = end - begin;
    end = begin;
  }
  return out;
}

void validate_layer_split(const std::vector<int>& split, int stages, int n_layers) {
  if (static_cast<int>(split.size()) != stages)
    throw ConfigError("pipeline layer split has " + std::to_string(split.size()) + " entries for " +
                      std::to_string(stages) + " stages");
  int total = 0;
  for (size_t i = 0; i < split.size(); ++i) {
    if (split[i] < 1)
      throw ConfigError("pipeline layer split: stage " + std::to_string(i) + " has " +
                        std::to_string(split[i]) + " layers: must be >= 1");
    total += split[i];
  }
  if (total != n_layers)
    throw ConfigError("pipeline layer split sums to " + std::to_string(total) +
                      " layers; the model has " + std::to_string(n_layers));
}

std::vector<int> stage_boundaries(const std::vector<int>& split) {
  std::vector<int> out{0};
  for (int n : split) out.push_back(out.back() + n);
  return out;
}

}  // namespace brigade
