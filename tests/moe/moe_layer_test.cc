// The single-process MoE MLP against a naive double-precision reference (routing, capacity
// drops, outputs, statistics, load-balancing loss), its gradients against finite differences
// of that reference and of the layer itself, closed-form overflow and tie cases, and the
// no-allocation contract of forward and backward.
#include "brigade/model/moe/moe_layer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_onednn.h"
#include "common/counted_allocations.h"
#include "kernels/gemm_backends.h"
#include "kernels/grad_check.h"
#include "moe/moe_reference.h"

namespace brigade {
namespace {

using test::all_close;
using test::check_grad_fd;
using test::naive_loss;
using test::naive_moe;
using test::RefMoe;

struct Case {
  int top_k;
  double capacity_factor;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const double cf = info.param.capacity_factor;
  return "top" + std::to_string(info.param.top_k) +
         (cf <= 0 ? std::string("_dropless")
                  : "_cf" + std::to_string(static_cast<int>(std::lround(cf * 100))));
}

// A small layer with its flat buffers, every expert present.
struct Fixture {
  MoeConfig cfg;
  ParamLayout layout;
  MoeParams mp;
  std::vector<float> params, grads;
  int64_t N;
  std::vector<float> x;

  Fixture(int top_k, double cf, int64_t n_tokens, int64_t C = 8, int64_t E = 4) : N(n_tokens) {
    cfg.d_model = C;
    cfg.n_experts = E;
    cfg.top_k = top_k;
    cfg.capacity_factor = cf;
    cfg.aux_loss_coef = 0.3;  // large enough that a wrong aux gradient shows
    mp = add_moe_params(layout, "h.0.mlp.", cfg, 0, E, 0.02f);
    params = test::named_params(layout, 0.4f, 11);
    grads.assign(params.size(), 0.0f);
    x = test::tokens(0, N, C, 5);
  }
  std::vector<double> params_d() const { return {params.begin(), params.end()}; }
  std::vector<double> x_d() const { return {x.begin(), x.end()}; }
};

class MoeLayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeLayerTest, MatchesNaiveReference) {
  Fixture f(GetParam().top_k, GetParam().capacity_factor, 24);
  MoeLayer layer(f.cfg, f.mp, f.N);
  std::vector<float> out(f.x.size(), -7.0f);
  const float term = layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  const RefMoe ref = naive_moe(f.cfg, f.mp, f.params_d(), f.x_d(), f.N);
  if (f.cfg.capacity_factor > 0 && f.cfg.capacity_factor < 1.0) {
    ASSERT_GT(ref.dropped, 0) << "the case must exercise dropping";
  }

  const int K = f.cfg.top_k;
  for (int64_t n = 0; n < f.N; ++n)
    for (int s = 0; s < K; ++s) {
      EXPECT_EQ(layer.router().expert()[n * K + s], ref.expert[n * K + s]) << n << "," << s;
      EXPECT_EQ(layer.dispatch().row_of(n, s) >= 0, ref.kept[n * K + s] == 1) << n << "," << s;
    }
  EXPECT_TRUE(all_close(out, ref.out, 1e-4, 1e-5));
  const MoeStats& st = layer.stats();
  EXPECT_EQ(st.tokens, f.N);
  EXPECT_EQ(st.assignments, f.N * K);
  EXPECT_EQ(st.capacity, ref.capacity);
  EXPECT_EQ(st.dropped, ref.dropped);
  EXPECT_EQ(st.load, ref.load);
  EXPECT_EQ(st.kept, ref.kept_per_expert);
  EXPECT_NEAR(st.aux_loss, ref.aux, 1e-5 * ref.aux);
  EXPECT_NEAR(term, f.cfg.aux_loss_coef * ref.aux, 1e-5);
}

// Every parameter and every input element against central differences of the naive reference
// in double (eps 1e-5: far too small to flip a routing choice at these margins).
TEST_P(MoeLayerTest, GradientsMatchFiniteDifferencesOfReference) {
  Fixture f(GetParam().top_k, GetParam().capacity_factor, 16);
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w = test::random_vector(f.N * f.cfg.d_model, 3);
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());

  std::vector<double> xd = f.x_d(), pd = f.params_d();
  for (const ParamSpec& s : f.layout.specs()) {
    std::vector<float> g(f.grads.begin() + s.offset, f.grads.begin() + s.offset + s.numel);
    std::vector<double> sub(pd.begin() + s.offset, pd.begin() + s.offset + s.numel);
    auto loss = [&](const std::vector<double>& v) {
      std::copy(v.begin(), v.end(), pd.begin() + s.offset);
      return naive_loss(f.cfg, f.mp, pd, xd, f.N, w);
    };
    std::vector<int64_t> all(static_cast<size_t>(s.numel));
    std::iota(all.begin(), all.end(), 0);
    EXPECT_TRUE(check_grad_fd(g, sub, all, loss, 2e-3, 1e-5)) << s.name;
    std::copy(sub.begin(), sub.end(), pd.begin() + s.offset);
  }
  std::vector<int64_t> all(xd.size());
  std::iota(all.begin(), all.end(), 0);
  auto loss_x = [&](const std::vector<double>& v) {
    return naive_loss(f.cfg, f.mp, pd, v, f.N, w);
  };
  EXPECT_TRUE(check_grad_fd(dx, xd, all, loss_x, 2e-3, 1e-5)) << "input";
}

// The load-balancing loss alone (no task loss): its gradient reaches the router weights and
// the inputs only through P_e, and is small next to the task loss's, so it gets its own check.
TEST_P(MoeLayerTest, AuxLossGradientMatchesFiniteDifferences) {
  Fixture f(GetParam().top_k, GetParam().capacity_factor, 16);
  f.cfg.aux_loss_coef = 1.0;
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w(f.x.size(), 0.0f);
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
  std::vector<double> xd = f.x_d(), pd = f.params_d();
  const int64_t nr = f.cfg.n_experts * f.cfg.d_model;
  std::vector<float> g(f.grads.begin() + f.mp.router_w, f.grads.begin() + f.mp.router_w + nr);
  std::vector<double> sub(pd.begin() + f.mp.router_w, pd.begin() + f.mp.router_w + nr);
  auto loss = [&](const std::vector<double>& v) {
    std::copy(v.begin(), v.end(), pd.begin() + f.mp.router_w);
    return naive_loss(f.cfg, f.mp, pd, xd, f.N, w);
  };
  std::vector<int64_t> all(static_cast<size_t>(nr));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_TRUE(check_grad_fd(g, sub, all, loss, 1e-3, 1e-5)) << "router";
  std::copy(sub.begin(), sub.end(), pd.begin() + f.mp.router_w);
  all.resize(xd.size());
  std::iota(all.begin(), all.end(), 0);
  auto loss_x = [&](const std::vector<double>& v) {
    return naive_loss(f.cfg, f.mp, pd, v, f.N, w);
  };
  EXPECT_TRUE(check_grad_fd(dx, xd, all, loss_x, 1e-3, 1e-5)) << "input";
  for (int64_t i = f.mp.experts_begin; i < f.mp.end; ++i) ASSERT_EQ(f.grads[i], 0.0f) << i;
}

// Central differences of the float layer itself, a few elements per tensor. A perturbation that
// changes a routing choice or a drop makes the loss jump; such elements are skipped, and most
// must remain.
TEST_P(MoeLayerTest, GradientsMatchFiniteDifferencesOfLayer) {
  Fixture f(GetParam().top_k, GetParam().capacity_factor, 16);
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w = test::random_vector(f.N * f.cfg.d_model, 4);
  const int K = f.cfg.top_k;
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  auto loss = [&] {
    const double term = layer.forward(out.data(), f.x.data(), f.N, f.params.data());
    return term + test::weighted_sum(out, w);
  };
  auto routing = [&] {
    std::vector<int> r;
    for (int64_t n = 0; n < f.N; ++n)
      for (int s = 0; s < K; ++s) {
        r.push_back(layer.router().expert()[n * K + s]);
        r.push_back(layer.dispatch().row_of(n, s) >= 0);
      }
    return r;
  };
  loss();
  const std::vector<int> base = routing();
  layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
  const float eps = 1e-2f;
  int checked = 0, skipped = 0;
  for (const ParamSpec& s : f.layout.specs()) {
    for (int64_t e : test::sample_indices(s.numel, 6, hash_name(s.name))) {
      float* p = f.params.data() + s.offset + e;
      const float saved = *p;
      *p = saved + eps;
      const double up = loss();
      const bool same_up = routing() == base;
      *p = saved - eps;
      const double down = loss();
      const bool same_down = routing() == base;
      *p = saved;
      if (!same_up || !same_down) {
        ++skipped;
        continue;
      }
      const double fd = (up - down) / (2.0 * eps);
      const double an = f.grads[static_cast<size_t>(s.offset + e)];
      EXPECT_LE(std::abs(fd - an), 2e-3 + 2e-2 * std::abs(an))
          << s.name << "[" << e << "]: finite difference " << fd << " analytic " << an;
      ++checked;
    }
  }
  EXPECT_GT(checked, 4 * skipped) << checked << " checked, " << skipped << " skipped";
}

// Backward accumulates into dx and grads (gradient accumulation needs no special case).
TEST_P(MoeLayerTest, BackwardAccumulates) {
  Fixture f(GetParam().top_k, GetParam().capacity_factor, 12);
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w = test::random_vector(f.N * f.cfg.d_model, 5);
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
  const std::vector<float> fresh_dx = dx, fresh_g = f.grads;
  const std::vector<float> pre_dx = test::random_vector(dx.size(), 6);
  const std::vector<float> pre_g = test::random_vector(f.grads.size(), 7);
  dx = pre_dx;
  f.grads = pre_g;
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
  EXPECT_TRUE(test::accumulated(dx, pre_dx, fresh_dx, 1e-5));
  EXPECT_TRUE(test::accumulated(f.grads, pre_g, fresh_g, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeLayerTest,
                         ::testing::Values(Case{1, 0.0}, Case{1, 1.0}, Case{1, 0.5}, Case{2, 0.0},
                                           Case{2, 1.25}, Case{2, 0.5}),
                         case_name);

// Every token prefers expert 0 (router row 0 reads feature 0, which is 1 for all tokens):
// with capacity ceil(1.0 * 12 / 4) = 3 the first three tokens are computed and the other nine
// are dropped, their output exactly 0.
TEST(MoeLayer, OverflowDropsLaterTokensAndZeroesThem) {
  Fixture f(1, 1.0, 12);
  const int64_t C = f.cfg.d_model, E = f.cfg.n_experts;
  std::fill(f.params.begin() + f.mp.router_w, f.params.begin() + f.mp.router_w + E * C, 0.0f);
  f.params[f.mp.router_w + 0] = 8.0f;
  for (int64_t n = 0; n < f.N; ++n) f.x[n * C] = 1.0f;
  MoeLayer layer(f.cfg, f.mp, f.N);
  std::vector<float> out(f.x.size());
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());
  EXPECT_EQ(layer.stats().capacity, 3);
  EXPECT_EQ(layer.stats().dropped, 9);
  EXPECT_EQ(layer.stats().load, (std::vector<int64_t>{12, 0, 0, 0}));
  EXPECT_EQ(layer.stats().kept, (std::vector<int64_t>{3, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(layer.stats().dropped_fraction(), 0.75);
  EXPECT_DOUBLE_EQ(layer.stats().load_imbalance(), 4.0);
  for (int64_t n = 0; n < f.N; ++n) {
    double norm = 0.0;
    for (int64_t c = 0; c < C; ++c) norm += std::abs(out[n * C + c]);
    if (n < 3)
      EXPECT_GT(norm, 0.0) << "token " << n;
    else
      EXPECT_EQ(norm, 0.0) << "token " << n;
  }
  // Switch aux loss with all load on expert 0: E * 1 * P_0.
  double p0 = 0.0;
  for (int64_t n = 0; n < f.N; ++n) p0 += layer.router().probs()[n * E];
  EXPECT_NEAR(layer.stats().aux_loss, E * p0 / f.N, 1e-6);
}

// A zero router gives every expert probability 1/E: ties go to the lowest indices, top-1 keeps
// the gate 1/E, top-2 renormalises to 1/2 each, and aux = 1 (perfectly "balanced" P, f all on
// the lowest experts: E * (1/K per chosen expert) * (1/E) summed = 1).
TEST(MoeLayer, TiesGoToTheLowerExpertIndex) {
  for (int K : {1, 2}) {
    Fixture f(K, 0.0, 6);
    std::fill(f.params.begin() + f.mp.router_w,
              f.params.begin() + f.mp.router_w + f.cfg.n_experts * f.cfg.d_model, 0.0f);
    MoeLayer layer(f.cfg, f.mp, f.N);
    std::vector<float> out(f.x.size());
    layer.forward(out.data(), f.x.data(), f.N, f.params.data());
    for (int64_t n = 0; n < f.N; ++n)
      for (int s = 0; s < K; ++s) {
        EXPECT_EQ(layer.router().expert()[n * K + s], s);
        EXPECT_FLOAT_EQ(layer.router().gate()[n * K + s], K == 1 ? 0.25f : 0.5f);
      }
    EXPECT_NEAR(layer.stats().aux_loss, 1.0, 1e-6);
  }
}

// With OpenBLAS no heap allocation at all, at any token count up to the one the layer was built
// for: the layer's buffers are sized once, and sgemm allocates nothing.
TEST(MoeLayer, ForwardAndBackwardDoNotAllocate) {
  test::ScopedGemmBackend openblas(GemmBackend::kOpenBlas);
  Fixture f(2, 1.0, 16);
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w = test::random_vector(f.N * f.cfg.d_model, 8);
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  layer.forward(out.data(), f.x.data(), f.N, f.params.data());  // warm OpenBLAS
  testing::CountedAllocations counted;
  for (int64_t n : {f.N, f.N / 2, int64_t{0}, f.N}) {
    layer.forward(out.data(), f.x.data(), n, f.params.data());
    layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
  }
  EXPECT_EQ(counted.count(), 0);
}

// With oneDNN the experts' varying row counts create no primitive once every GEMM family has
// been seen (they share run-time-shape primitives, kernels/cpu/gemm_onednn.cc), and nothing
// grows: the same token counts allocate the same in every pass. The blocks themselves are
// oneDNN's per call (its argument map, the memory objects of a run-time shape); the layer's own
// part is the zero of the OpenBLAS test above.
TEST(MoeLayer, ForwardAndBackwardOnOneDnnCreateNothingAfterWarmup) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  Fixture f(2, 1.0, 16);
  MoeLayer layer(f.cfg, f.mp, f.N);
  const std::vector<float> w = test::random_vector(f.N * f.cfg.d_model, 8);
  std::vector<float> out(f.x.size()), dx(f.x.size(), 0.0f);
  const auto pass = [&] {
    for (int64_t n : {f.N, f.N / 2, int64_t{0}, f.N}) {
      layer.forward(out.data(), f.x.data(), n, f.params.data());
      layer.backward(dx.data(), w.data(), f.x.data(), 1.0f, f.params.data(), f.grads.data());
    }
  };
  pass();  // warm-up
  const detail::OneDnnGemmStats warm = detail::onednn_gemm_stats();
  std::vector<int64_t> allocs;
  for (int rep = 0; rep < 3; ++rep) {
    testing::CountedAllocations counted;
    pass();
    allocs.push_back(counted.count());
  }
  const detail::OneDnnGemmStats after = detail::onednn_gemm_stats();
  EXPECT_GT(after.calls, warm.calls);  // the experts really ran on oneDNN
  EXPECT_EQ(after.primitives_created, warm.primitives_created);
  EXPECT_EQ(allocs[1], allocs[0]);
  EXPECT_EQ(allocs[2], allocs[0]);
}

TEST(MoeConfig, RejectsInvalidValuesNamingTheKey) {
  auto message = [](MoeConfig c) {
    try {
      c.validate();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  MoeConfig c;
  c.top_k = 3;
  EXPECT_NE(message(c).find("model.moe_top_k = 3"), std::string::npos) << message(c);
  c = MoeConfig{};
  c.n_experts = 0;
  EXPECT_NE(message(c).find("model.n_experts = 0"), std::string::npos) << message(c);
  c = MoeConfig{};
  c.n_experts = 1;
  c.top_k = 2;
  EXPECT_NE(message(c).find("model.n_experts = 1"), std::string::npos) << message(c);
  c = MoeConfig{};
  c.aux_loss_coef = -1;
  EXPECT_NE(message(c).find("model.aux_loss_coef"), std::string::npos) << message(c);
  EXPECT_EQ(message(MoeConfig{}), "no error");
}

TEST(MoeConfig, CapacityFormula) {
  MoeConfig c;
  c.n_experts = 8;
  c.top_k = 2;
  c.capacity_factor = 1.25;
  EXPECT_EQ(c.capacity(100), 32);  // ceil(1.25 * 100 * 2 / 8) = ceil(31.25)
  EXPECT_EQ(c.capacity(64), 20);   // exactly 20
  c.capacity_factor = 0.0;
  EXPECT_EQ(c.capacity(100), -1);
}

TEST(MoeParams, NamesAndShapesFollowGpt2) {
  MoeConfig c;
  c.d_model = 8;
  c.n_experts = 4;
  ParamLayout layout;
  const MoeParams mp = add_moe_params(layout, "h.3.mlp.", c, 2, 4, 0.01f);
  EXPECT_EQ(layout.at("h.3.mlp.router.weight").shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(layout.at("h.3.mlp.experts.2.c_fc.weight").shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(layout.at("h.3.mlp.experts.3.c_proj.weight").shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(layout.at("h.3.mlp.experts.3.c_proj.bias").offset, mp.experts[1].proj_b);
  EXPECT_EQ(layout.find("h.3.mlp.experts.0.c_fc.weight"), nullptr);
  EXPECT_EQ(mp.end, layout.total());
  EXPECT_EQ(mp.experts_begin, 32);
  EXPECT_FALSE(layout.at("h.3.mlp.experts.2.c_fc.bias").weight_decay);
}

}  // namespace
}  // namespace brigade
