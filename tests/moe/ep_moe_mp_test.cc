// Expert parallelism across real processes: an ep group of k = 1, 2, 4 ranks, each routing its
// own tokens (uneven counts, one rank with none), must equal one process running the union of
// the tokens through the single-process MoeLayer (itself checked against a naive reference in
// moe_layer_test): same routing and drops, same outputs and loss term, same statistics, input
// gradients of each rank's tokens, the router gradient summed over the group, and every
// expert's gradient on its owner. The all_to_all_v and all_gather bytes are checked against
// the formulas, with the row counts taken from the reference's routing.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "brigade/base/error.h"
#include "brigade/model/moe/ep_moe_layer.h"
#include "brigade/model/moe/moe_layer.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"
#include "kernels/grad_check.h"
#include "moe/moe_reference.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using test::all_close;

struct EpCase {
  int ep;
  int top_k;
  double capacity_factor;
};

std::string case_name(const ::testing::TestParamInfo<EpCase>& info) {
  const double cf = info.param.capacity_factor;
  return "ep" + std::to_string(info.param.ep) + "_top" + std::to_string(info.param.top_k) +
         (cf <= 0 ? std::string("_dropless")
                  : "_cf" + std::to_string(static_cast<int>(std::lround(cf * 100))));
}

// Tokens per rank: uneven, and rank 1 of a 4-group routes none.
std::vector<int64_t> tokens_per_rank(int k) {
  if (k == 1) return {19};
  if (k == 2) return {17, 11};
  return {13, 0, 9, 21};
}

class EpMoeTest : public ::testing::TestWithParam<EpCase> {};

TEST_P(EpMoeTest, EqualsOneProcessOnTheUnionOfTokens) {
  const EpCase c = GetParam();
  const int k = c.ep;
  const std::vector<int64_t> counts = tokens_per_rank(k);
  testutil::TempDir dir;
  auto result = testutil::run_ranks(k, 60s, [&](int rank) {
    MoeConfig cfg;
    cfg.d_model = 8;
    cfg.n_experts = 8;
    cfg.top_k = c.top_k;
    cfg.capacity_factor = c.capacity_factor;
    cfg.aux_loss_coef = 0.3;
    const int64_t C = cfg.d_model, E = cfg.n_experts, K = cfg.top_k;
    const int64_t n_total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    int64_t first = 0;
    for (int q = 0; q < rank; ++q) first += counts[q];
    const int64_t N = counts[rank];
    const int64_t max_tokens = *std::max_element(counts.begin(), counts.end());

    // The reference: every expert, every token, one process.
    ParamLayout full;
    const MoeParams fmp = add_moe_params(full, "h.0.mlp.", cfg, 0, E, 0.02f);
    const std::vector<float> fparams = test::named_params(full, 0.4f, 11);
    std::vector<float> fgrads(fparams.size(), 0.0f);
    const std::vector<float> x_all = test::tokens(0, n_total, C, 5);
    const std::vector<float> w_all = test::tokens(0, n_total, C, 9);
    MoeLayer ref(cfg, fmp, n_total);
    std::vector<float> out_ref(x_all.size()), dx_ref(x_all.size(), 0.0f);
    const float term_ref = ref.forward(out_ref.data(), x_all.data(), n_total, fparams.data());
    ref.backward(dx_ref.data(), w_all.data(), x_all.data(), 1.0f, fparams.data(), fgrads.data());
    if (c.capacity_factor > 0 && c.capacity_factor <= 1.0)
      ASSERT_GT(ref.stats().dropped, 0) << "the case must exercise dropping";

    // This rank: the router and its E/k experts, its own tokens.
    auto comm = testutil::make_file_comm(dir.path(), rank, k, 20000ms, "ep");
    const int64_t el = E / k;
    ParamLayout local;
    const MoeParams lmp = add_moe_params(local, "h.0.mlp.", cfg, rank * el, (rank + 1) * el, 0.02f);
    const std::vector<float> lparams = test::named_params(local, 0.4f, 11);
    std::vector<float> lgrads(lparams.size(), 0.0f);
    EpMoeLayer layer(cfg, lmp, *comm, max_tokens);
    const std::vector<float> x(x_all.begin() + first * C, x_all.begin() + (first + N) * C);
    const std::vector<float> w(w_all.begin() + first * C, w_all.begin() + (first + N) * C);
    std::vector<float> out(x.size(), -3.0f), dx(x.size(), 0.0f);

    const OpCounters a2a0 = comm->stats().get(OpKind::kAllToAllV);
    const OpCounters ag0 = comm->stats().get(OpKind::kAllGather);
    const float term = layer.forward(out.data(), x.data(), N, lparams.data());
    layer.backward(dx.data(), w.data(), x.data(), 1.0f, lparams.data(), lgrads.data());
    const OpCounters a2a1 = comm->stats().get(OpKind::kAllToAllV);
    const OpCounters ag1 = comm->stats().get(OpKind::kAllGather);

    // Routing and drops of this rank's tokens.
    for (int64_t n = 0; n < N; ++n)
      for (int s = 0; s < K; ++s) {
        ASSERT_EQ(layer.router().expert()[n * K + s], ref.router().expert()[(first + n) * K + s])
            << "token " << first + n << " slot " << s;
        ASSERT_EQ(layer.dispatch().row_of(n, s) >= 0, ref.dispatch().row_of(first + n, s) >= 0)
            << "token " << first + n << " slot " << s << " kept";
      }
    const std::vector<float> out_slice(out_ref.begin() + first * C,
                                       out_ref.begin() + (first + N) * C);
    EXPECT_TRUE(all_close(out, out_slice, 1e-5, 1e-6)) << "outputs";
    EXPECT_NEAR(term, term_ref, 1e-6) << "loss term";
    EXPECT_EQ(layer.stats().tokens, n_total);
    EXPECT_EQ(layer.stats().capacity, ref.stats().capacity);
    EXPECT_EQ(layer.stats().dropped, ref.stats().dropped);
    EXPECT_EQ(layer.stats().load, ref.stats().load);
    EXPECT_EQ(layer.stats().kept, ref.stats().kept);
    EXPECT_NEAR(layer.stats().aux_loss, ref.stats().aux_loss, 1e-6);

    // Gradients: inputs of this rank's tokens, router summed over the group, owned experts.
    const std::vector<float> dx_slice(dx_ref.begin() + first * C, dx_ref.begin() + (first + N) * C);
    EXPECT_TRUE(all_close(dx, dx_slice, 1e-4, 1e-6)) << "input gradients";
    const int64_t nr = E * C;
    std::vector<float> router_sum(lgrads.begin() + lmp.router_w,
                                  lgrads.begin() + lmp.router_w + nr);
    comm->all_reduce(router_sum.data(), nr, ReduceOp::kSum);
    const std::vector<float> router_ref(fgrads.begin() + fmp.router_w,
                                        fgrads.begin() + fmp.router_w + nr);
    EXPECT_TRUE(all_close(router_sum, router_ref, 1e-4, 1e-6)) << "router gradient";
    for (const ParamSpec& s : local.specs()) {
      if (s.offset < lmp.experts_begin) continue;
      const ParamSpec& fs = full.at(s.name);
      const std::vector<float> got(lgrads.begin() + s.offset, lgrads.begin() + s.offset + s.numel);
      const std::vector<float> want(fgrads.begin() + fs.offset,
                                    fgrads.begin() + fs.offset + fs.numel);
      EXPECT_TRUE(all_close(got, want, 1e-4, 1e-6)) << s.name;
    }

    // Bytes: rows this rank dispatches to other ranks, and rows other ranks dispatch here,
    // counted on the reference's routing; each row is C floats and travels once per
    // all_to_all_v (dispatch, combine, and the two mirrored in backward).
    int64_t out_rows = 0, in_rows = 0;
    for (int64_t g = 0; g < n_total; ++g)
      for (int s = 0; s < K; ++s) {
        if (ref.dispatch().row_of(g, s) < 0) continue;
        const int owner = ref.router().expert()[g * K + s] / static_cast<int>(el);
        const bool mine = g >= first && g < first + N;
        if (mine && owner != rank) ++out_rows;
        if (!mine && owner == rank) ++in_rows;
      }
    EXPECT_EQ(a2a1.calls - a2a0.calls, 4);
    EXPECT_EQ(a2a1.bytes_sent - a2a0.bytes_sent, 2 * 4 * C * (out_rows + in_rows));
    EXPECT_EQ(a2a1.bytes_received - a2a0.bytes_received, 2 * 4 * C * (out_rows + in_rows));
    const int64_t table = 1 + E * K + E;
    EXPECT_EQ(ag1.calls - ag0.calls, 1);
    EXPECT_EQ(ag1.bytes_sent - ag0.bytes_sent, (k - 1) * 4 * table);
    if (rank == 0)
      std::printf(
          "ep=%d top_k=%d cf=%.2f: %lld tokens, %lld of %lld assignments dropped, "
          "rank 0 sends %lld and receives %lld rows per all_to_all_v\n",
          k, c.top_k, c.capacity_factor, static_cast<long long>(n_total),
          static_cast<long long>(layer.stats().dropped),
          static_cast<long long>(layer.stats().assignments), static_cast<long long>(out_rows),
          static_cast<long long>(in_rows));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(Ep, EpMoeTest,
                         ::testing::Values(EpCase{1, 2, 1.25}, EpCase{2, 1, 1.0}, EpCase{2, 2, 0.0},
                                           EpCase{2, 2, 1.0}, EpCase{4, 1, 0.0}, EpCase{4, 1, 0.5},
                                           EpCase{4, 2, 1.0}),
                         case_name);

TEST(ExpertParallel, RejectsExpertsNotDivisibleByEp) {
  MoeConfig cfg;
  cfg.n_experts = 6;
  try {
    validate_expert_parallel(cfg, 4);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model.n_experts = 6"), std::string::npos) << m;
    EXPECT_NE(m.find("parallel.ep = 4"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(validate_expert_parallel(cfg, 3));
}

}  // namespace
}  // namespace brigade
