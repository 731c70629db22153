// The router and dispatch kernels (softmax, top-k gating, row gather/scatter) against naive
// references and, for the backward passes, central differences in double.
#include <gtest/gtest.h>

#include <cmath>

#include "brigade/kernels/cpu/row_gather.h"
#include "brigade/kernels/cpu/softmax.h"
#include "brigade/kernels/cpu/topk_gate.h"
#include "kernels/grad_check.h"

namespace brigade {
namespace {

using test::all_close;
using test::check_grad_fd;

std::vector<double> naive_softmax(const std::vector<double>& l, int64_t N, int64_t V) {
  std::vector<double> p(l.size());
  for (int64_t n = 0; n < N; ++n) {
    double z = 0.0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(l[n * V + j]);
    for (int64_t j = 0; j < V; ++j) p[n * V + j] = std::exp(l[n * V + j]) / z;
  }
  return p;
}

TEST(Softmax, ForwardAndBackward) {
  const int64_t N = 5, V = 7;
  const std::vector<float> logits = test::random_vector(N * V, 1, -3.0f, 3.0f);
  const std::vector<float> w = test::random_vector(N * V, 2);
  std::vector<float> probs(N * V), dlogits(N * V, 0.0f);
  softmax_forward(probs.data(), logits.data(), N, V);
  std::vector<double> ld = test::to_double(logits);
  EXPECT_TRUE(all_close(probs, naive_softmax(ld, N, V), 1e-6, 1e-7));
  softmax_backward(dlogits.data(), probs.data(), w.data(), N, V);
  auto loss = [&](const std::vector<double>& l) {
    const std::vector<double> p = naive_softmax(l, N, V);
    double s = 0.0;
    for (size_t i = 0; i < p.size(); ++i) s += p[i] * w[i];
    return s;
  };
  EXPECT_TRUE(check_grad_fd(dlogits, ld, test::sample_indices(N * V, N * V, 0), loss, 1e-4, 1e-5));
}

// Gates as a function of the probabilities, with the choices fixed by the unperturbed row.
TEST(TopkGate, ChoicesGatesAndBackward) {
  const int64_t N = 6, E = 5;
  for (int K : {1, 2}) {
    const std::vector<float> probs = test::random_vector(N * E, 3 + K, 0.05f, 1.0f);
    std::vector<int32_t> expert(N * K);
    std::vector<float> gate(N * K);
    topk_gate_forward(expert.data(), gate.data(), probs.data(), N, E, K);
    for (int64_t n = 0; n < N; ++n) {
      const float* p = probs.data() + n * E;
      for (int64_t e = 0; e < E; ++e) {
        EXPECT_LE(p[e], p[expert[n * K]]);
        if (K == 2 && e != expert[n * K]) EXPECT_LE(p[e], p[expert[n * K + 1]]);
      }
      if (K == 2) {
        EXPECT_NE(expert[n * K], expert[n * K + 1]);
        EXPECT_NEAR(gate[n * K] + gate[n * K + 1], 1.0f, 1e-6f);
      } else {
        EXPECT_EQ(gate[n], p[expert[n]]);
      }
    }
    const std::vector<float> dgate = test::random_vector(N * K, 9);
    std::vector<float> dprobs(N * E, 0.0f);
    topk_gate_backward(dprobs.data(), probs.data(), expert.data(), dgate.data(), N, E, K);
    std::vector<double> pd = test::to_double(probs);
    auto loss = [&](const std::vector<double>& p) {
      double s = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0.0;
        for (int k = 0; k < K; ++k) sum += p[n * E + expert[n * K + k]];
        for (int k = 0; k < K; ++k) {
          const double pk = p[n * E + expert[n * K + k]];
          s += dgate[n * K + k] * (K == 1 ? pk : pk / sum);
        }
      }
      return s;
    };
    EXPECT_TRUE(check_grad_fd(dprobs, pd, test::sample_indices(N * E, N * E, 0), loss, 1e-4, 1e-6))
        << "K " << K;
  }
}

TEST(TopkGate, TiesGoToTheLowerIndex) {
  const std::vector<float> probs = {0.3f, 0.3f, 0.1f, 0.3f};
  std::vector<int32_t> expert(2);
  std::vector<float> gate(2);
  topk_gate_forward(expert.data(), gate.data(), probs.data(), 1, 4, 2);
  EXPECT_EQ(expert[0], 0);
  EXPECT_EQ(expert[1], 1);
  EXPECT_FLOAT_EQ(gate[0], 0.5f);
}

TEST(RowGather, GatherScatterDot) {
  const int64_t N = 4, M = 5, C = 3;
  const std::vector<int32_t> rows = {2, 0, 2, 3, 1};
  const std::vector<float> scale = {0.5f, -1.0f, 2.0f, 1.0f, 0.25f};
  const std::vector<float> inp = test::random_vector(N * C, 1);
  const std::vector<float> src = test::random_vector(M * C, 2);
  std::vector<float> g(M * C), out(N * C, 1.0f), dot(M);
  gather_rows(g.data(), inp.data(), rows.data(), scale.data(), M, C);
  scatter_add_rows(out.data(), src.data(), rows.data(), scale.data(), M, C);
  rows_dot(dot.data(), inp.data(), rows.data(), src.data(), M, C);
  std::vector<double> g_ref(M * C), out_ref(N * C, 1.0), dot_ref(M, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t c = 0; c < C; ++c) {
      g_ref[i * C + c] = inp[rows[i] * C + c] * scale[i];
      out_ref[rows[i] * C + c] += src[i * C + c] * scale[i];
      dot_ref[i] += static_cast<double>(inp[rows[i] * C + c]) * src[i * C + c];
    }
  EXPECT_TRUE(all_close(g, g_ref, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(out, out_ref, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dot, dot_ref, 1e-6, 1e-6));
}

}  // namespace
}  // namespace brigade
