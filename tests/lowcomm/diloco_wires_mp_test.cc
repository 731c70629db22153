// DiLoCo with the pseudo-gradient compressors that aggregate inside the collective
// (sync/lowcomm/diloco.h), across real processes. For each, every outer step must be the
// Nesterov step of what a second, independent compressor makes of the same Deltas (its
// estimate of the replicas' mean), against the recurrence in double; every rank ends on bitwise
// the same weights, and the counted bytes equal bytes_per_step():
//   - kSign, the error-fed 1-bit all-reduce (sign_allreduce.h), with its two residuals;
//   - kPowerSgd with f32 and bf16 P and Q: besides, nothing is lost (the mean over replicas of
//     (sum of Deltas - residual) equals the sum of the applied estimates), and bf16 sends about
//     half the bytes of f32.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "brigade/sync/lowcomm/diloco.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::mixed_layout;
using testutil::replica_grad;

constexpr int kWorld = 3;
constexpr int kRounds = 3;

struct OuterRun {
  std::vector<double> drift;    // this replica's sum of Deltas
  std::vector<double> applied;  // sum of the estimates the outer steps applied
};

// R outer steps of DilocoOuter(c) on this rank, each after inner steps that moved theta by
// -0.05 g; `reference(delta, round, comm)` turns the same Delta into the group's estimate.
void run_outer_steps(int rank, Communicator& comm, DilocoOuter& outer, int64_t n,
                     const std::function<void(float*, int, Communicator&)>& reference,
                     OuterRun& run) {
  std::vector<double> ref(outer.global(), outer.global() + n), v(n, 0.0);
  run = OuterRun{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  std::vector<float> theta(n), delta(n);
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<float> g = replica_grad(n, rank, round);
    for (int64_t i = 0; i < n; ++i) {
      theta[i] = outer.global()[i] - 0.05f * g[i];
      delta[i] = outer.global()[i] - theta[i];  // the pseudo-gradient the outer step sees
      run.drift[i] += delta[i];
    }
    outer.set_update(round);
    const Traffic t = testutil::traffic_of(comm, [&] { outer.outer_step(theta.data(), comm); });
    EXPECT_EQ(t.sent, outer.bytes_per_step(kWorld, rank).sent);
    EXPECT_EQ(t.received, outer.bytes_per_step(kWorld, rank).received);
    reference(delta.data(), round, comm);
    for (int64_t i = 0; i < n; ++i) {
      run.applied[i] += delta[i];
      v[i] = 0.9 * v[i] + delta[i];
      ref[i] -= 0.7 * (delta[i] + 0.9 * v[i]);
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(theta[i], ref[i], 1e-5) << "round " << round;
  }
  EXPECT_TRUE(testutil::identical_across_ranks(comm, theta.data(), n));
}

TEST(DilocoWiresMp, OneBitOuterStepIsNesterovOnTheCompressedMean) {
  testutil::expect_ranks_pass(kWorld, 60s, [&](int rank, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    const std::vector<float> theta0 = testutil::normal_vector(n, 5, "theta");
    DilocoOuter outer({.wire = OuterWire::kSign, .sign_block = 32}, theta0.data(), 0, n, &l);
    SignAllReduce reference(l, 0, n, 32);
    OuterRun run;
    run_outer_steps(
        rank, comm, outer, n,
        [&](float* delta, int, Communicator& c) { reference.all_reduce_mean(delta, c); }, run);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
    const std::vector<StateView> local = outer.local_state_tensors();
    ASSERT_EQ(local.size(), 2u);
    EXPECT_EQ(local[0].name, "diloco.residual");
    EXPECT_EQ(local[1].name, "diloco.owner_residual");
  });
}

void powersgd_case(WireDtype wire) {
  testutil::expect_ranks_pass(kWorld, 60s, [&](int rank, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    const std::vector<float> theta0 = testutil::normal_vector(n, 6, "theta");
    const PowerSgdConfig pc{.rank = 2, .seed = 9, .wire = wire};
    DilocoOuter outer({.wire = OuterWire::kPowerSgd, .powersgd = pc}, theta0.data(), 0, n, &l);
    PowerSgd reference(pc, l, 0, n);
    OuterRun run;
    run_outer_steps(
        rank, comm, outer, n,
        [&](float* delta, int round, Communicator& c) {
          reference.set_steps(round);
          reference.reduce(delta, c);
        },
        run);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
    // Error feedback: mean over replicas of (drift - residual) == what was applied.
    const std::vector<StateView> local = outer.local_state_tensors();
    ASSERT_EQ(local.size(), 1u);
    EXPECT_EQ(local[0].name, "diloco.residual");
    std::vector<float> kept(n);
    for (int64_t i = 0; i < n; ++i) kept[i] = static_cast<float>(run.drift[i]) - local[0].data[i];
    comm.all_reduce(kept.data(), n, ReduceOp::kAvg);
    // bf16 rounds the mean of the uncompressed tensors on the wire, which has no residual.
    const double tol = wire == WireDtype::kBF16 ? 2e-3 : 1e-4;
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(kept[i], run.applied[i], tol) << i;
    EXPECT_EQ(outer.state_tensors().back().name, "diloco.powersgd_q");
    if (wire == WireDtype::kBF16) {
      DilocoOuter wide({.wire = OuterWire::kPowerSgd, .powersgd = {.rank = 2, .seed = 9}},
                       theta0.data(), 0, n, &l);
      EXPECT_LT(outer.bytes_per_step(kWorld, rank).sent * 10,
                wide.bytes_per_step(kWorld, rank).sent * 6);
    }
  });
}

TEST(DilocoWiresMp, PowerSgdF32OuterStepIsNesterovOnItsMeanEstimate) {
  powersgd_case(WireDtype::kF32);
}

TEST(DilocoWiresMp, PowerSgdBf16OuterStepIsNesterovOnItsMeanEstimate) {
  powersgd_case(WireDtype::kBF16);
}

}  // namespace
}  // namespace brigade
