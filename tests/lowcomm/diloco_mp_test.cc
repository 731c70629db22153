// DiLoCo's outer step across real processes. "DiLoCo with H = 1, inner SGD, outer lr 1 and
// momentum 0 equals DDP with SGD": each replica takes one SGD step from the shared theta, the
// outer step averages; DDP all-reduces the gradients and takes one SGD step (optim/sgd.h).
// Tolerance: the two differ only in rounding order -- theta - lr g_i rounded, the pseudo-
// gradient, the ring sum and the final subtraction -- so we require
// |a - b| <= 4 * FLT_EPSILON * (|theta| + lr |g|max) per element.
// Also: Nesterov rounds equal a local recurrence on every rank, the int8 wire equals a local
// simulation bitwise, and the counted bytes equal bytes_per_step() (and the group totals).
#include <gloo/allreduce.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "brigade/optim/sgd.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/diloco.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::replica_grad;

static_assert(kRingAllReduceSegmentBytes ==
                  static_cast<int64_t>(gloo::detail::AllreduceOptionsImpl::kMaxSegmentSize),
              "the all-reduce byte formula must use Gloo's segment size");

ParamLayout layout() {
  ParamLayout l;
  l.add({.name = "w", .shape = {33, 29}});
  l.add({.name = "b", .shape = {44}, .weight_decay = false});
  return l;
}

TEST(DilocoMp, OneInnerStepUnitOuterLrNoMomentumEqualsDdpSgd) {
  const int W = 3;
  testutil::TempDir dir;
  auto result = testutil::run_ranks(W, 30s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, W);
    const ParamLayout l = layout();
    const int64_t n = l.total();
    const float lr = 0.05f;
    const std::vector<float> theta = testutil::normal_vector(n, 3, "theta");
    std::vector<float> g = replica_grad(n, rank, 0);
    // DiLoCo: a local SGD step, then the outer step.
    std::vector<float> local = theta;
    DilocoOuter outer({.outer_lr = 1.0f, .momentum = 0.0f}, theta.data(), 0, n);
    Sgd inner({.momentum = 0.0f}, l, 0, n);
    inner.step(local.data(), g.data(), 0, n, lr, 1);
    const Traffic t = testutil::traffic_of(*comm, [&] { outer.outer_step(local.data(), *comm); });
    EXPECT_EQ(t.sent, outer.bytes_per_step(W, rank).sent);
    EXPECT_EQ(t.received, outer.bytes_per_step(W, rank).received);
    EXPECT_EQ(testutil::sum_across_ranks(*comm, t.sent), 2 * (W - 1) * 4 * n);
    // DDP: average the gradients, one SGD step.
    std::vector<float> ddp = theta;
    comm->all_reduce(g.data(), n, ReduceOp::kAvg);
    Sgd sgd({.momentum = 0.0f}, l, 0, n);
    sgd.step(ddp.data(), g.data(), 0, n, lr, 1);
    float gmax = 0.0f;
    for (int r = 0; r < W; ++r) gmax = std::max(gmax, testutil::max_abs(replica_grad(n, r, 0)));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(local[i], ddp[i], 4 * FLT_EPSILON * (std::fabs(theta[i]) + lr * gmax)) << i;
    }
    EXPECT_TRUE(testutil::identical_across_ranks(*comm, local.data(), n));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

// H inner SGD steps per round on replica-specific gradients, R rounds of the default outer
// Nesterov; every rank also runs the whole group locally (mean in double) as the reference.
TEST(DilocoMp, NesterovRoundsMatchALocalRecurrence) {
  const int W = 2, H = 3, R = 3;
  testutil::TempDir dir;
  auto result = testutil::run_ranks(W, 30s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, W);
    const ParamLayout l = layout();
    const int64_t n = l.total();
    std::vector<float> theta = testutil::normal_vector(n, 4, "theta");
    DilocoOuter outer(DilocoConfig{}, theta.data(), 0, n);
    std::vector<double> ref(theta.begin(), theta.end()), v(n, 0.0);
    for (int round = 0; round < R; ++round) {
      std::vector<double> mean_delta(n, 0.0);
      const std::vector<float> start = theta;
      for (int r = 0; r < W; ++r) {
        std::vector<float> local = start;
        for (int h = 0; h < H; ++h) {
          const std::vector<float> g = replica_grad(n, r, round * H + h);
          for (int64_t i = 0; i < n; ++i) local[i] -= 0.01f * g[i];
        }
        for (int64_t i = 0; i < n; ++i) mean_delta[i] += (double{start[i]} - local[i]) / W;
        if (r == rank) theta = local;
      }
      outer.outer_step(theta.data(), *comm);
      for (int64_t i = 0; i < n; ++i) {
        v[i] = 0.9 * v[i] + mean_delta[i];
        ref[i] -= 0.7 * (mean_delta[i] + 0.9 * v[i]);
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(theta[i], ref[i], 1e-5) << "round " << round;
    }
    EXPECT_TRUE(testutil::identical_across_ranks(*comm, theta.data(), n));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(DilocoMp, Int8WireEqualsLocalSimulationAndCountsItsBytes) {
  const int W = 3;
  testutil::TempDir dir;
  auto result = testutil::run_ranks(W, 30s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, W);
    const int64_t n = 5000;
    const DilocoConfig c{.wire = OuterWire::kInt8, .int8_chunk = 1024};
    const std::vector<float> theta = testutil::normal_vector(n, 5, "theta");
    DilocoOuter outer(c, theta.data(), 0, n);
    DilocoOuter exact(DilocoConfig{}, theta.data(), 0, n);
    auto local_of = [&](int r) {
      std::vector<float> local = theta;
      const std::vector<float> g = replica_grad(n, r, 0);
      for (int64_t i = 0; i < n; ++i) local[i] -= 0.02f * g[i];
      return local;
    };
    std::vector<float> mine = local_of(rank), mine_f32 = mine;
    const Traffic t = testutil::traffic_of(*comm, [&] { outer.outer_step(mine.data(), *comm); });
    EXPECT_EQ(outer.payload_bytes(), 24 + 5 * 1024 + n);
    EXPECT_EQ(t.sent, (W - 1) * outer.payload_bytes());
    EXPECT_EQ(t.received, outer.bytes_per_step(W, rank).received);
    // Local simulation: quantize every replica's Delta, dequantize-sum in rank order, / W.
    Int8Codec codec(n, 1024);
    std::vector<uint8_t> buf(codec.size_bytes());
    std::vector<float> sum(n, 0.0f), delta(n);
    DilocoOuter sim(c, theta.data(), 0, n);
    for (int r = 0; r < W; ++r) {
      sim.pseudo_gradient(local_of(r).data(), delta.data());
      codec.encode(delta.data(), buf.data());
      codec.decode_add(buf.data(), sum.data());
    }
    for (float& x : sum) x *= 1.0f / W;
    std::vector<float> want(n);
    sim.apply_mean(sum.data(), want.data());
    ASSERT_EQ(0, std::memcmp(mine.data(), want.data(), sizeof(float) * n));
    // And close to the f32 wire: where no replica's Delta is in a clamped tail (beyond
    // +-3 sigma), each dequantized value is within one bin (6 sigma / 256) of the truth, and
    // the first Nesterov step scales the error by lr (1 + mu).
    exact.outer_step(mine_f32.data(), *comm);
    std::vector<std::vector<float>> deltas(W, std::vector<float>(n));
    double max_scale = 0.0;
    std::vector<double> sig(W);
    for (int r = 0; r < W; ++r) {
      const std::vector<float> local = local_of(r);
      for (int64_t i = 0; i < n; ++i) deltas[r][i] = theta[i] - local[i];
      double sq = 0.0;
      for (float x : deltas[r]) sq += double{x} * x;
      sig[r] = std::sqrt(sq / (n - 1));
      max_scale = std::max(max_scale, 6.0 * sig[r] / 256.0);
    }
    int64_t compared = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool tail = false;
      for (int r = 0; r < W; ++r) tail |= std::fabs(deltas[r][i]) > 2.5 * sig[r];
      if (tail) continue;
      ++compared;
      ASSERT_LE(std::fabs(mine[i] - mine_f32[i]), 0.7 * 1.9 * max_scale * 1.2) << i;
    }
    EXPECT_GT(compared, n * 9 / 10);
    EXPECT_TRUE(testutil::identical_across_ranks(*comm, mine.data(), n));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(DilocoMp, F32BytesPerRankFollowTheRingFormula) {
  // n = 1001 does not split evenly: ranks count different bytes, each equal to the formula.
  for (int W : {2, 3}) {
    testutil::TempDir dir;
    auto result = testutil::run_ranks(W, 30s, [&](int rank) {
      auto comm = testutil::make_file_comm(dir.path(), rank, W);
      const int64_t n = 1001;
      std::vector<float> theta = testutil::normal_vector(n, 6, "theta");
      DilocoOuter outer(DilocoConfig{}, theta.data(), 0, n);
      const Traffic t = testutil::traffic_of(*comm, [&] { outer.outer_step(theta.data(), *comm); });
      EXPECT_EQ(t.sent, outer.bytes_per_step(W, rank).sent);
      EXPECT_EQ(t.received, outer.bytes_per_step(W, rank).received);
      EXPECT_EQ(testutil::sum_across_ranks(*comm, t.sent), 2 * (W - 1) * 4 * n);
      EXPECT_EQ(testutil::sum_across_ranks(*comm, t.received), 2 * (W - 1) * 4 * n);
    });
    EXPECT_TRUE(testutil::AllRanksOk(result)) << "W " << W;
  }
}

}  // namespace
}  // namespace brigade
