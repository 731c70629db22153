// Data parallelism must not change training: DP=2 and DP=4 runs of the same global batch
// equal the single-process run (loss at every step, every final weight), and gradient
// accumulation equals a larger micro-batch. Real processes started by `brigade launch`,
// talking Gloo over loopback.
//
// Tolerances: see dp_run_helpers.h (weights within 1e-5 of the largest weight, loss within
// 1e-5 relative at every step; optimizer state within 1e-3 where the reduction order differs).
// The final validation passes are not compared: a different micro-batch evaluates a different
// number of validation examples (eval_batches x micro_batch).
#include <gtest/gtest.h>

#include "parallel/dp_run_helpers.h"

namespace brigade {
namespace {

class DdpEquivalence : public testing::DpRuns {};

TEST_F(DdpEquivalence, TwoAndFourRanksEqualOneProcess) {
  // Global batch 16 in every run: 1 x 16, 2 x 8, 4 x 4.
  std::string one = run("dp1", 1, "--set train.micro_batch=16");
  std::string two = run("dp2", 2, "--set train.micro_batch=8");
  std::string four = run("dp4", 4, "--set train.micro_batch=4");
  expect_same_training(one, two, 1e-3, /*same_eval=*/false);
  expect_same_training(one, four, 1e-3, /*same_eval=*/false);
}

TEST_F(DdpEquivalence, GradientAccumulationEqualsALargerMicroBatch) {
  std::string big = run("mb16", 1, "--set train.micro_batch=16");
  std::string accum = run("mb4x4", 1, "--set train.micro_batch=4 --set train.grad_accum=4");
  std::string both = run("dp2x2", 2, "--set train.micro_batch=4 --set train.grad_accum=2");
  expect_same_training(big, accum, 1e-3, /*same_eval=*/false);
  expect_same_training(big, both, 1e-3, /*same_eval=*/false);
}

TEST_F(DdpEquivalence, Bf16WirePayloadStaysClose) {
  std::string f32 = run("f32", 2, "--set train.micro_batch=8");
  std::string bf16 = run("bf16", 2, "--set train.micro_batch=8 --set parallel.grad_wire=bf16");
  auto la = losses(f32), lb = losses(bf16);
  ASSERT_EQ(la.size(), lb.size());
  // bf16 keeps 8 bits of mantissa: the runs drift apart but train alike.
  EXPECT_NEAR(la.back(), lb.back(), 0.02 * la.back());
  EXPECT_NE(la.back(), lb.back());
}

}  // namespace
}  // namespace brigade
