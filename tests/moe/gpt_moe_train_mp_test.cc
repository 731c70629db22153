// A MoE GPT trained through the CLI: data parallelism over 2 processes equals one process on
// the same global batch (each micro-batch is routed on its own in both: the one process runs
// grad_accum = 2 micro-batches of the size each rank runs), the routing metrics are written, and
// training lowers the loss. Tolerances as in dp_run_helpers.h.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "parallel/dp_run_helpers.h"

namespace brigade {
namespace {

class GptMoeTraining : public testing::DpRuns {};

// The comparison is only as continuous as the routing. The two runs differ by rounding from the
// first step (one process accumulates its second micro-batch onto the first's gradients, the
// ranks sum theirs: bias and embedding sums run in another order), and top-2 selection and the
// capacity cut are discontinuous in the router's probabilities, which start near-uniform: when
// such noise crosses a near-tie, one token goes to another expert and the runs part by that
// token's update (loss 1e-5, weights 1e-4 later), which no rounding tolerance bounds. Seed 11
// (kZeroConfig's) does that at step 12 with the oneDNN kernels; over seeds 11-36 it was the only
// one of 26 to do it with oneDNN, none of 26 with OpenBLAS; every other run agreed to 1e-7. The
// seed here is one where neither backend's noise meets a tie, so the 1e-5 bounds test what they
// are meant to (dispatch, aux loss and gradient sync), not luck.
const char* kMoe =
    "--set model.n_experts=4 --set model.moe_top_k=2 --set model.capacity_factor=1.0 "
    "--set model.aux_loss_coef=0.05 --set train.micro_batch=8 --set run.seed=12 ";

TEST_F(GptMoeTraining, TwoRanksEqualOneProcessAndTheLossFalls) {
  const std::string one = run("moe1", 1, std::string(kMoe) + "--set train.grad_accum=2");
  const std::string two = run("moe2", 2, kMoe);
  expect_same_training(one, two, 1e-3);

  const auto l = losses(one);
  ASSERT_EQ(l.size(), 20u);
  EXPECT_LT(l.back(), l.front() - 0.5) << "training lowers the loss";

  // Every step record has the routing metrics; the summary has the run's.
  std::ifstream in(one + "/metrics.jsonl");
  std::string line;
  int steps = 0;
  bool summary = false;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("tokens_per_s")) {
      ++steps;
      ASSERT_TRUE(j.contains("moe_aux_loss")) << line;
      const double drop = j["moe_dropped_pct"].get<double>();
      EXPECT_GE(drop, 0.0);
      EXPECT_LT(drop, 100.0);
      EXPECT_GE(j["moe_load_imbalance"].get<double>(), 1.0);
      EXPECT_LE(j["moe_load_imbalance"].get<double>(), 4.0);  // at most E
      // The aux term is part of the loss: aux_loss_coef * E * sum f P >= coef per MoE block.
      EXPECT_GE(j["moe_aux_loss"].get<double>(), 2 * 0.05 * (1 - 1e-6));
      EXPECT_LT(j["moe_aux_loss"].get<double>(), j["loss"].get<double>());
    }
    if (j.contains("final") && j.contains("moe_dropped_pct")) summary = true;
  }
  EXPECT_EQ(steps, 20);
  EXPECT_TRUE(summary);
}

TEST_F(GptMoeTraining, InvalidKeysStopBeforeLaunch) {
  const std::string cmd = std::string(BRIGADE_BINARY) + " train " + config_ +
                          " --set run.out_dir=" + dir_ + "/bad --set model.n_experts=4 " +
                          "--set model.moe_top_k=3";
  const auto r = testing::run_command(cmd, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.moe_top_k = 3"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brigade
