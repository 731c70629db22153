// Checkpoints hold the full, unpadded flat layout whatever the strategy, so a run may stop under
// one strategy and number of ranks and continue under another: the result must match the
// uninterrupted run. Stopping is run.stop_after = 10 (a checkpoint at step 10); resuming is
// running the same run folder again with other settings.
//
// Tolerance: the same as for equivalence (dp_run_helpers.h): per step |loss_a - loss_b| <=
// 1e-5 * loss_a, over the final weights max|a - b| <= 1e-5 * max|a|, and for each optimizer
// state vector 1e-5 (2 ranks throughout) or 1e-3 (resumed on 4 ranks, whose reduction order
// differs) of its largest value. Bitwise equality is not required across strategies, though on
// 2 ranks it holds in practice.
#include "dp_run_helpers.h"

namespace brigade {
namespace {

using testing::DpRuns;

TEST_F(DpRuns, ZeroThreeCheckpointResumesUnderDdp) {
  std::string uninterrupted = run("ddp", 2, "");
  std::string resumed = run("z3-then-ddp", 2, "--set parallel.zero=3 --set run.stop_after=10");
  ASSERT_EQ(losses(resumed).size(), 10u);
  run("z3-then-ddp", 2, "--set parallel.zero=0");
  expect_same_training(uninterrupted, resumed);
}

TEST_F(DpRuns, TwoRankCheckpointsResumeUnderZeroOneAndThreeOnFourRanks) {
  // Global batch 16 throughout: 2 ranks x 8, then 4 ranks x 4.
  std::string uninterrupted = run("ddp", 2, "");
  std::string z1 = run("ddp-then-z1x4", 2, "--set run.stop_after=10");
  run("ddp-then-z1x4", 4, "--set parallel.zero=1 --set train.micro_batch=4");
  expect_same_training(uninterrupted, z1, /*state_tol=*/1e-3, /*same_eval=*/false);
  std::string z3 = run("z2-then-z3x4", 2, "--set parallel.zero=2 --set run.stop_after=10");
  run("z2-then-z3x4", 4, "--set parallel.zero=3 --set train.micro_batch=4");
  expect_same_training(uninterrupted, z3, /*state_tol=*/1e-3, /*same_eval=*/false);
}

}  // namespace
}  // namespace brigade
