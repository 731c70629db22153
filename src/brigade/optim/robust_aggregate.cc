#include "brigade/optim/robust_aggregate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace brigade {

double bound_norm(float* v, int64_t n, double bound) {
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) squares += static_cast<double>(v[i]) * v[i];
  const double norm = std::sqrt(squares);
  if (norm > bound && norm > 0) {
    const auto scale = static_cast<float>(bound / norm);
    for (int64_t i = 0; i < n; ++i) v[i] *= scale;
  }
  return norm;
}

void coordinate_median(const std::vector<const float*>& updates, int64_t n, float* out) {
  const size_t k = updates.size();
  std::vector<float> column(k);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t u = 0; u < k; ++u) column[u] = updates[u][i];
    const size_t mid = k / 2;
    std::nth_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(mid),
                     column.end());
    const float upper = column[mid];
    if (k % 2 == 1) {
      out[i] = upper;
      continue;
    }
    const float lower =
        *std::max_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(mid));
    out[i] = static_cast<float>(0.5 * (static_cast<double>(lower) + upper));
  }
}

void trimmed_mean(const std::vector<const float*>& updates, int64_t n, int64_t trim, float* out) {
  const size_t k = updates.size();
  std::vector<float> column(k);
  const auto t = static_cast<size_t>(trim);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t u = 0; u < k; ++u) column[u] = updates[u][i];
    std::sort(column.begin(), column.end());
    double sum = 0;
    for (size_t u = t; u < k - t; ++u) sum += column[u];
    out[i] = static_cast<float>(sum / static_cast<double>(k - 2 * t));
  }
}

std::vector<double> krum_scores(const std::vector<const float*>& updates, int64_t n, int64_t f) {
  const size_t k = updates.size();
  std::vector<double> distance(k * k, 0.0);
  for (size_t a = 0; a < k; ++a) {
    for (size_t b = a + 1; b < k; ++b) {
      double d = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double diff = static_cast<double>(updates[a][i]) - updates[b][i];
        d += diff * diff;
      }
      distance[a * k + b] = distance[b * k + a] = d;
    }
  }
  const auto nearest = static_cast<size_t>(static_cast<int64_t>(k) - f - 2);
  std::vector<double> scores(k), others;
  for (size_t a = 0; a < k; ++a) {
    others.clear();
    for (size_t b = 0; b < k; ++b) {
      if (b != a) others.push_back(distance[a * k + b]);
    }
    std::partial_sort(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(nearest),
                      others.end());
    scores[a] =
        std::accumulate(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(nearest), 0.0);
  }
  return scores;
}

std::vector<int> lowest_scores(const std::vector<double>& scores, int64_t m) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return scores[static_cast<size_t>(a)] < scores[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::min<int64_t>(m, static_cast<int64_t>(order.size()))));
  return order;
}

namespace {

void weighted_mean(const std::vector<const float*>& updates, const std::vector<int>& chosen,
                   const std::vector<double>& weights, int64_t n, float* out) {
  double total = 0;
  for (int k : chosen) total += weights.empty() ? 1.0 : weights[static_cast<size_t>(k)];
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int k : chosen) {
      sum += (weights.empty() ? 1.0 : weights[static_cast<size_t>(k)]) *
             updates[static_cast<size_t>(k)][i];
    }
    out[i] = static_cast<float>(sum / total);
  }
}

}  // namespace

std::vector<int> robust_combine(const RobustRule& rule, const std::vector<const float*>& updates,
                                const std::vector<double>& weights, int64_t n, float* out) {
  const auto k = static_cast<int64_t>(updates.size());
  std::vector<int> all(updates.size());
  std::iota(all.begin(), all.end(), 0);
  if (rule.name == "median") {
    coordinate_median(updates, n, out);
  } else if (rule.name == "trimmed_mean") {
    trimmed_mean(updates, n, static_cast<int64_t>(rule.trim_fraction * static_cast<double>(k)),
                 out);
  } else if (rule.name == "krum" || rule.name == "multi_krum") {
    const int64_t m =
        rule.name == "krum" ? 1 : (rule.krum_select > 0 ? rule.krum_select : k - rule.byzantine);
    std::vector<int> chosen = lowest_scores(krum_scores(updates, n, rule.byzantine), m);
    std::sort(chosen.begin(), chosen.end());
    weighted_mean(updates, chosen, weights, n, out);
    return chosen;
  } else {
    weighted_mean(updates, all, weights, n, out);
  }
  return all;
}

}  // namespace brigade
