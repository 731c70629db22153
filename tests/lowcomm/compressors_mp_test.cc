// PowerSGD, EF-signSGD and top-k with error feedback across real processes (2-3 ranks, a
// different gradient per rank): every rank's output equals a local simulation of the whole
// group (bitwise for the all_gather methods, which decode in rank order; within 1e-5 for
// PowerSGD, whose ring all-reduce sums in another order), all ranks agree bitwise, and the
// counted bytes equal bytes_per_step().
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "brigade/sync/lowcomm/powersgd.h"
#include "brigade/sync/lowcomm/signef.h"
#include "brigade/sync/lowcomm/topk_ef.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::mixed_layout;
using testutil::replica_grad;

TEST(PowerSgdMp, MatchesLocalSimulationAndCountsBytes) {
  for (int rank_r : {2, 64}) {  // low rank, and full rank (reproduces the mean gradient)
    const int W = 3;
    testutil::TempDir dir;
    auto result = testutil::run_ranks(W, 30s, [&](int rank) {
      auto comm = testutil::make_file_comm(dir.path(), rank, W);
      const ParamLayout l = mixed_layout();
      const int64_t n = l.total();
      const PowerSgdConfig c{.rank = rank_r, .seed = 3, .skip_incompressible = false};
      PowerSgd ps(c, l, 0, n);
      std::vector<PowerSgd> sim;
      for (int r = 0; r < W; ++r) sim.emplace_back(c, l, 0, n);
      for (int step = 0; step < 3; ++step) {
        std::vector<float> g = replica_grad(n, rank, step);
        const Traffic t = testutil::traffic_of(*comm, [&] { ps.reduce(g.data(), *comm); });
        EXPECT_EQ(t.sent, ps.bytes_per_step(W, rank).sent);
        EXPECT_EQ(t.received, ps.bytes_per_step(W, rank).received);
        // The group: phases with the means taken here.
        std::vector<std::vector<float>> gs(W), p(W, std::vector<float>(ps.p_floats())),
            q(W, std::vector<float>(ps.q_floats()));
        std::vector<float> mp(ps.p_floats(), 0.0f), mq(ps.q_floats(), 0.0f);
        std::vector<double> mean_g(n, 0.0);
        for (int r = 0; r < W; ++r) {
          gs[r] = replica_grad(n, r, step);
          for (int64_t i = 0; i < n; ++i) mean_g[i] += double{gs[r][i]} / W;
          sim[r].phase_p(gs[r].data(), p[r].data());
          for (int64_t i = 0; i < ps.p_floats(); ++i) mp[i] += p[r][i] / W;
        }
        for (int r = 0; r < W; ++r) {
          p[r] = mp;
          sim[r].phase_q(p[r].data(), q[r].data());
          for (int64_t i = 0; i < ps.q_floats(); ++i) mq[i] += q[r][i] / W;
        }
        for (int r = 0; r < W; ++r) sim[r].phase_finish(p[r].data(), mq.data(), gs[r].data());
        ASSERT_LE(testutil::max_abs_diff(g.data(), gs[rank].data(), n), 1e-5) << "step " << step;
        if (rank_r == 64) {
          for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(g[i], mean_g[i], 2e-4) << i;
        }
        EXPECT_TRUE(testutil::identical_across_ranks(*comm, g.data(), n));
      }
    });
    EXPECT_TRUE(testutil::AllRanksOk(result)) << "rank " << rank_r;
  }
}

// Runs `steps` steps of an all_gather-based method M (SignEf or TopkEf) with real comm and as a
// local simulation of the group; requires bitwise equality and the byte formula.
template <typename Make>
void check_gather_method(int W, Make make) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(W, 30s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, W);
    const int64_t n = mixed_layout().total();
    auto method = make();
    std::vector<decltype(make())> sim;
    for (int r = 0; r < W; ++r) sim.push_back(make());
    const int64_t bytes = method.payload_bytes();
    std::vector<uint8_t> gathered(W * bytes);
    std::vector<float> update(n), want(n);
    for (int step = 0; step < 3; ++step) {
      const float scale = 0.1f * (step + 1);
      const Traffic t = testutil::traffic_of(*comm, [&] {
        method.step(replica_grad(n, rank, step).data(), scale, update.data(), *comm);
      });
      EXPECT_EQ(t.sent, method.bytes_per_step(W, rank).sent);
      EXPECT_EQ(t.received, method.bytes_per_step(W, rank).received);
      EXPECT_EQ(t.sent, (W - 1) * bytes);
      for (int r = 0; r < W; ++r) {
        sim[r].compress(replica_grad(n, r, step).data(), scale, gathered.data() + r * bytes);
      }
      sim[rank].decode_mean(gathered.data(), W, want.data());
      ASSERT_EQ(0, std::memcmp(update.data(), want.data(), sizeof(float) * n)) << step;
      ASSERT_EQ(0, std::memcmp(method.state_tensors()[0].data, sim[rank].state_tensors()[0].data,
                               sizeof(float) * n));
      EXPECT_TRUE(testutil::identical_across_ranks(*comm, update.data(), n));
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result)) << "W " << W;
}

TEST(SignEfMp, MatchesLocalSimulationAndCountsBytes) {
  for (int W : {2, 3}) {
    check_gather_method(W, [] {
      const ParamLayout l = mixed_layout();
      return SignEf(l, 0, l.total());
    });
  }
}

TEST(TopkEfMp, MatchesLocalSimulationAndCountsBytes) {
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16}) {
    check_gather_method(
        3, [f] { return TopkEf({.fraction = 0.01, .values = f}, 0, mixed_layout().total()); });
  }
}

}  // namespace
}  // namespace brigade
