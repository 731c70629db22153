#pragma once
// Helpers shared by the low-communication tests: small layouts, deterministic per-rank data,
// a naive DCT basis in double precision, and comparison helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/tensor/param_spec.h"
#include "brigade/tensor/rng.h"

namespace brigade::testutil {

// A layout with a matrix whose rows and columns need different chunks, a 1-D bias, a small
// matrix, and a tensor of rank 3: (96, 40) -> 48x40 blocks, (100) -> rows of 50,
// (5, 7) -> one 5x7 block, (4, 6, 8) -> (4, 48) -> 4x48 blocks.
inline ParamLayout mixed_layout() {
  ParamLayout l;
  l.add({.name = "w1", .shape = {96, 40}});
  l.add({.name = "b1", .shape = {100}, .weight_decay = false});
  l.add({.name = "w2", .shape = {5, 7}});
  l.add({.name = "w3", .shape = {4, 6, 8}});
  return l;
}

// Values of stream (seed, key) as N(0, std).
inline std::vector<float> normal_vector(int64_t n, uint64_t seed, const std::string& key,
                                        float std = 1.0f) {
  std::vector<float> v(n);
  fill_normal(v.data(), n, 0.0f, std, seed, hash_name(key));
  return v;
}

// Gradient of replica `rank` at `step`: a pure function, so any process can compute any
// replica's gradient (the multi-process tests simulate the whole group locally to compare).
inline std::vector<float> replica_grad(int64_t n, int rank, int step, uint64_t seed = 7) {
  return normal_vector(n, seed, "grad/" + std::to_string(rank) + "/" + std::to_string(step));
}

// Naive orthonormal DCT-II basis in double: t[j * s + b] = c_b cos(pi (2j+1) b / 2s).
inline std::vector<double> naive_basis(int s) {
  std::vector<double> t(s * s);
  for (int j = 0; j < s; ++j) {
    for (int b = 0; b < s; ++b) {
      const double c = b == 0 ? std::sqrt(1.0 / s) : std::sqrt(2.0 / s);
      t[j * s + b] = c * std::cos(M_PI * (2 * j + 1) * b / (2.0 * s));
    }
  }
  return t;
}

inline float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max |a - b| over two equal-length vectors.
inline double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double{a[i]} - b[i]));
  return m;
}

}  // namespace brigade::testutil
