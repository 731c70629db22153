#include "brigade/infer/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "brigade/base/error.h"
#include "brigade/tensor/rng.h"

namespace brigade {

void validate(const SamplingOptions& o) {
  if (!(o.temperature >= 0 && o.temperature <= 100)) {
    throw ConfigError(fmt::format("--temperature {}: must be in [0, 100]", o.temperature));
  }
  if (o.top_k < 0) throw ConfigError(fmt::format("--top-k {}: must be >= 0", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    throw ConfigError(fmt::format("--top-p {}: must be in (0, 1]", o.top_p));
  }
}

TokenSampler::TokenSampler(const SamplingOptions& options, int64_t decodable)
    : options_(options),
      decodable_(decodable),
      order_(static_cast<size_t>(decodable)),
      probs_(static_cast<size_t>(decodable)) {
  validate(options);
}

int32_t TokenSampler::sample(const float* logits, uint64_t stream, uint64_t index) {
  const int64_t V = decodable_;
  // Ties go to the lower id, so the order (and greedy) is the same on every rank.
  const auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options_.temperature <= 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i) {
      if (more_likely(i, best)) best = i;
    }
    return best;
  }
  std::iota(order_.begin(), order_.end(), 0);
  const int64_t k = options_.top_k > 0 ? std::min(options_.top_k, V) : V;
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), more_likely);
  const double max_logit = logits[order_[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    probs_[static_cast<size_t>(i)] =
        std::exp((logits[order_[i]] - max_logit) / options_.temperature);
    sum += probs_[static_cast<size_t>(i)];
  }
  // Nucleus: the most likely ids until their share reaches top_p (at least one).
  int64_t n = k;
  if (options_.top_p < 1) {
    double acc = 0;
    for (n = 0; n < k;) {
      acc += probs_[static_cast<size_t>(n++)];
      if (acc >= options_.top_p * sum) break;
    }
    sum = acc;
  }
  double u = random_uniform(options_.seed, hash_name("generate") + stream, index) * sum;
  for (int64_t i = 0; i < n; ++i) {
    u -= probs_[static_cast<size_t>(i)];
    if (u <= 0) return order_[static_cast<size_t>(i)];
  }
  return order_[static_cast<size_t>(n - 1)];
}

}  // namespace brigade
