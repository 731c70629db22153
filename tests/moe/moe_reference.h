#pragma once
// Shared by the MoE tests: deterministic parameters and tokens, and a naive mixture-of-experts
// forward in double written from the definitions (per-token loops, no buffers, no kernels), the
// independent reference the layers are compared with.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "brigade/model/moe/moe_config.h"
#include "brigade/model/moe/moe_params.h"
#include "brigade/tensor/param_spec.h"
#include "brigade/tensor/rng.h"

namespace brigade::test {

// Every tensor, biases included, gets normal(0, std) values keyed by its name, so a layout with
// a subset of the experts holds exactly the values of the full layout's tensors.
inline std::vector<float> named_params(const ParamLayout& layout, float std, uint64_t seed) {
  std::vector<float> p(static_cast<size_t>(layout.total()));
  for (const ParamSpec& s : layout.specs())
    fill_normal(p.data() + s.offset, s.numel, 0.0f, std, seed, hash_name(s.name));
  return p;
}

// Token n of a global stream: values depend only on (seed, n), so ranks can generate their
// slices and the reference the union.
inline std::vector<float> tokens(int64_t first, int64_t count, int64_t C, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(count * C));
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < C; ++c)
      x[n * C + c] =
          2.0f * random_uniform(seed, 77, static_cast<uint64_t>((first + n) * C + c)) - 1.0f;
  return x;
}

struct RefMoe {
  std::vector<double> out;                     // (N,C)
  std::vector<int> expert;                     // (N,K)
  std::vector<int> kept;                       // (N,K) 1 kept, 0 dropped
  std::vector<int64_t> load, kept_per_expert;  // (E)
  int64_t dropped = 0;
  int64_t capacity = -1;
  double aux = 0.0;  // E sum f P, before the coefficient
};

inline double ref_gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// params is the full layout (all experts) of mp; x is (N,C).
inline RefMoe naive_moe(const MoeConfig& cfg, const MoeParams& mp,
                        const std::vector<double>& params, const std::vector<double>& x,
                        int64_t N) {
  const int64_t C = cfg.d_model, E = cfg.n_experts, H = 4 * C;
  const int K = cfg.top_k;
  RefMoe r;
  r.out.assign(static_cast<size_t>(N * C), 0.0);
  r.expert.resize(static_cast<size_t>(N * K));
  r.kept.assign(static_cast<size_t>(N * K), 0);
  r.load.assign(static_cast<size_t>(E), 0);
  r.kept_per_expert.assign(static_cast<size_t>(E), 0);
  std::vector<double> probs(static_cast<size_t>(N * E)), gates(static_cast<size_t>(N * K));
  const double* wr = params.data() + mp.router_w;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> logit(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e)
      for (int64_t c = 0; c < C; ++c) logit[e] += wr[e * C + c] * x[n * C + c];
    const double mx = *std::max_element(logit.begin(), logit.end());
    double z = 0.0;
    for (double& l : logit) z += (l = std::exp(l - mx));
    for (int64_t e = 0; e < E; ++e) probs[n * E + e] = logit[e] / z;
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return probs[n * E + a] > probs[n * E + b]; });
    double s = 0.0;
    for (int k = 0; k < K; ++k) s += probs[n * E + order[k]];
    for (int k = 0; k < K; ++k) {
      r.expert[n * K + k] = order[k];
      gates[n * K + k] = K == 1 ? probs[n * E + order[k]] : probs[n * E + order[k]] / s;
      ++r.load[order[k]];
    }
  }
  // Capacity: first choices of all tokens in order, then second choices.
  r.capacity = cfg.capacity_factor <= 0.0
                   ? -1
                   : static_cast<int64_t>(std::ceil(cfg.capacity_factor * N * K / E));
  for (int k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int e = r.expert[n * K + k];
      if (r.capacity < 0 || r.kept_per_expert[e] < r.capacity) {
        ++r.kept_per_expert[e];
        r.kept[n * K + k] = 1;
      } else {
        ++r.dropped;
      }
    }
  for (int64_t n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      if (!r.kept[n * K + k]) continue;
      const ExpertParams& w = mp.experts[static_cast<size_t>(r.expert[n * K + k])];
      std::vector<double> a(static_cast<size_t>(H));
      for (int64_t h = 0; h < H; ++h) {
        double v = params[w.fc_b + h];
        for (int64_t c = 0; c < C; ++c) v += params[w.fc_w + h * C + c] * x[n * C + c];
        a[h] = ref_gelu(v);
      }
      for (int64_t c = 0; c < C; ++c) {
        double v = params[w.proj_b + c];
        for (int64_t h = 0; h < H; ++h) v += params[w.proj_w + c * H + h] * a[h];
        r.out[n * C + c] += gates[n * K + k] * v;
      }
    }
  for (int64_t e = 0; e < E; ++e) {
    double p = 0.0;
    for (int64_t n = 0; n < N; ++n) p += probs[n * E + e];
    if (N > 0) r.aux += (static_cast<double>(r.load[e]) / (N * K)) * (p / N);
  }
  r.aux *= static_cast<double>(E);
  return r;
}

// The scalar the gradient tests differentiate: sum_i w_i out_i + aux_loss_coef * aux.
inline double naive_loss(const MoeConfig& cfg, const MoeParams& mp,
                         const std::vector<double>& params, const std::vector<double>& x, int64_t N,
                         const std::vector<float>& w) {
  const RefMoe r = naive_moe(cfg, mp, params, x, N);
  double s = cfg.aux_loss_coef * r.aux;
  for (size_t i = 0; i < w.size(); ++i) s += r.out[i] * w[i];
  return s;
}

}  // namespace brigade::test
