#pragma once
// Helpers shared by the kernel tests: random inputs, closeness checks that report the worst
// element, and central finite differences of a scalar objective evaluated in double.
//
// The finite differences are taken of the test's own naive reference written in double, not
// of the float kernel, so the only errors are O(eps^2) truncation and the kernel's float
// rounding; the stated tolerances sit well above both and far below what a wrong formula
// produces (an O(1) relative error).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

namespace brigade::test {

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Every |actual[i] - expected[i]| <= rtol * |expected[i]| + atol.
template <typename A, typename E>
::testing::AssertionResult all_close(const A& actual, const E& expected, double rtol, double atol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  double worst = 0.0;
  size_t worst_i = 0;
  bool ok = true;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double err = std::fabs(a - e);
    const double allowed = rtol * std::fabs(e) + atol;
    // !(err <= allowed) also catches NaN.
    if (!(err <= allowed)) {
      if (ok || err > worst) {
        worst = err;
        worst_i = i;
      }
      ok = false;
    }
  }
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_i << ": actual " << static_cast<double>(actual[worst_i])
         << " expected " << static_cast<double>(expected[worst_i]) << " (rtol " << rtol << ", atol "
         << atol << ")";
}

// Compares an analytic gradient with central differences of `loss` (a function of x,
// evaluated in double) at the given indices: |g - fd| <= tol * (|fd| + scale), where scale
// is the largest |fd| seen, so the tolerance is relative to the gradient's magnitude.
template <typename Loss>
::testing::AssertionResult check_grad_fd(const std::vector<float>& grad, std::vector<double>& x,
                                         const std::vector<int64_t>& indices, Loss&& loss,
                                         double tol, double eps = 1e-3) {
  std::vector<double> fd(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const auto i = static_cast<size_t>(indices[k]);
    const double saved = x[i];
    x[i] = saved + eps;
    const double plus = loss(x);
    x[i] = saved - eps;
    const double minus = loss(x);
    x[i] = saved;
    fd[k] = (plus - minus) / (2.0 * eps);
  }
  const double scale = max_abs(fd);
  if (!(scale > 0.0)) return ::testing::AssertionFailure() << "all-zero finite differences";
  for (size_t k = 0; k < indices.size(); ++k) {
    const double g = grad[static_cast<size_t>(indices[k])];
    if (!(std::fabs(g - fd[k]) <= tol * (std::fabs(fd[k]) + scale))) {
      return ::testing::AssertionFailure()
             << "index " << indices[k] << ": analytic " << g << " finite difference " << fd[k]
             << " (gradient scale " << scale << ", tol " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// All indices of [0, n) if n <= max_count, else max_count spread over the range (first and
// last included) plus a deterministic random subset.
inline std::vector<int64_t> sample_indices(int64_t n, int64_t max_count, uint64_t seed) {
  std::vector<int64_t> idx;
  if (n <= max_count) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  idx.push_back(0);
  idx.push_back(n - 1);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  while (static_cast<int64_t>(idx.size()) < max_count) idx.push_back(dist(gen));
  return idx;
}

// sum_i out[i] * w[i] in double: the scalar objective whose gradient w.r.t. out is w.
template <typename V>
double weighted_sum(const V& out, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < w.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

// Accumulate contract: a gradient buffer prefilled with `prefill` ends up holding
// prefill + fresh (fresh = the result starting from zero).
inline ::testing::AssertionResult accumulated(const std::vector<float>& result,
                                              const std::vector<float>& prefill,
                                              const std::vector<float>& fresh, double tol) {
  std::vector<double> expected(result.size());
  for (size_t i = 0; i < result.size(); ++i) {
    expected[i] = static_cast<double>(prefill[i]) + fresh[i];
  }
  return all_close(result, expected, tol, tol);
}

}  // namespace brigade::test
