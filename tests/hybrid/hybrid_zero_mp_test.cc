// ZeRO-1/2 on the dp axis of the hybrid mesh (parallel.zero = 1 or 2 with tp/pp), end to end
// through the real CLI. Each dp rank steps only its own whole tensors of a chunk, then the chunk
// is all-gathered over dp (parallel/dp_shard_update.h). The optimizer update is elementwise, so a
// zero = 1 run must equal the zero = 0 run of the same mesh bitwise (same gradients, same norm,
// same per-element update, the gathered values copied exactly), and the single-process run of
// the same global batch within the tolerances of hybrid_train_mp_test.cc. A rank that stepped
// tensors it does not own, or a gather that missed a range, leaves some dp replica stale: its
// weights (and so the next losses) differ from the zero = 0 run. The optimizer state is saved
// per tensor by its owner, so checkpoints cross between zero = 0 and zero = 1 both ways.
// ZeRO-2 reduce-scatters the gradients instead of all-reducing them and sums the norm's squares
// over dp, so its norm (and with clipping on, the update) may differ from zero = 0 in the last
// bits: it is held to the single-process tolerances, and its traffic to the reduce-scatter's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hybrid/hybrid_runs.h"

namespace brigade {
namespace {

// The summary record (the last line of metrics.jsonl).
nlohmann::json summary_of(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

std::vector<int64_t> state_floats(const std::string& run) {
  const nlohmann::json s = summary_of(run);
  EXPECT_TRUE(s.contains("optimizer_state_floats")) << s.dump();
  return s.value("optimizer_state_floats", std::vector<int64_t>{});
}

int64_t sent_bytes(const std::string& run) {
  return summary_of(run).value("comm_sent_bytes", int64_t{0});
}

TEST_F(HybridRuns, Zero1EqualsZero0AndOneProcess) {
  const std::string ref = run("ref", 1, "--set train.grad_accum=8");
  const std::string z0 = run("dp2pp2_z0", 4, "--set parallel.pp=2");
  const std::string z1 = run("dp2pp2_z1", 4, "--set parallel.pp=2 --set parallel.zero=1");
  expect_losses_close(z1, ref, kLossTol);
  expect_weights_close(z1, ref, kWeightTol);
  EXPECT_EQ(losses(z1), losses(z0));
  expect_weights_close(z1, z0, 0.0);
  EXPECT_EQ(summary_of(z1)["zero"], 1);
  EXPECT_EQ(summary_of(z0)["zero"], 0);

  // Optimizer state per rank. World ranks follow the mesh order pp x dp x ep x tp (tp fastest),
  // so with ep = tp = 1 rank = pp * 2 + dp. Under zero = 0 both dp ranks of a pipeline position
  // hold the whole chunk's state; under zero = 1 they split it: the two shares add up to it
  // exactly, and the split by whole tensors is balanced (each share at most 60% of the chunk).
  const std::vector<int64_t> s0 = state_floats(z0), s1 = state_floats(z1);
  ASSERT_EQ(s0.size(), 4u);
  ASSERT_EQ(s1.size(), 4u);
  for (int pp = 0; pp < 2; ++pp) {
    const int64_t whole = s0[pp * 2];
    EXPECT_GT(whole, 0);
    EXPECT_EQ(s0[pp * 2 + 1], whole) << "zero = 0 replicates the state over dp";
    EXPECT_EQ(s1[pp * 2] + s1[pp * 2 + 1], whole) << "pp " << pp;
    for (int dp = 0; dp < 2; ++dp) {
      EXPECT_GT(s1[pp * 2 + dp], 0) << "pp " << pp << " dp " << dp;
      EXPECT_LE(s1[pp * 2 + dp], whole * 6 / 10) << "pp " << pp << " dp " << dp;
    }
    std::printf(
        "pp %d: optimizer state %lld floats per rank at zero = 0, %lld + %lld at zero = 1\n", pp,
        static_cast<long long>(whole), static_cast<long long>(s1[pp * 2]),
        static_cast<long long>(s1[pp * 2 + 1]));
  }

  // dp2 x tp2: the split is per tp shard (each tp rank's own layout).
  const std::string tp = run("dp2tp2_z1", 4, "--set parallel.tp=2 --set parallel.zero=1");
  expect_losses_close(tp, ref, kLossTol);
  expect_weights_close(tp, ref, kWeightTol);

  // ep2 x dp2 (MoE): the dp ranks of an ep coordinate hold the same dense tensors and experts,
  // so ZeRO-1 splits them as it splits a dense chunk; the update is elementwise, so bitwise the
  // zero = 0 run. Dropless routing, no balancing loss.
  const std::string moe =
      "--set model.n_experts=4 --set model.moe_every=2 --set model.moe_top_k=2 "
      "--set model.capacity_factor=0 --set model.aux_loss_coef=0 --set parallel.ep=2 "
      "--set train.grad_accum=2 ";
  const std::string ep_z0 = run("ep2dp2_z0", 4, moe);
  const std::string ep_z1 = run("ep2dp2_z1", 4, moe + "--set parallel.zero=1");
  EXPECT_EQ(losses(ep_z1), losses(ep_z0));
  expect_weights_close(ep_z1, ep_z0, 0.0, /*dense=*/false);
  const std::vector<int64_t> e0 = state_floats(ep_z0), e1 = state_floats(ep_z1);
  ASSERT_EQ(e1.size(), 4u);
  // Ranks: dp * 2 + ep; the two dp ranks of an ep coordinate split its state.
  for (int ep = 0; ep < 2; ++ep) EXPECT_EQ(e1[ep] + e1[2 + ep], e0[ep]) << "ep " << ep;
  // ZeRO-2: each rank's range reduce-scattered over dp, its dense part then averaged over ep;
  // the norm sums the ranges' squares in another order, hence the tolerances, not bitwise.
  const std::string ep_z2 = run("ep2dp2_z2", 4, moe + "--set parallel.zero=2");
  expect_losses_close(ep_z2, ep_z0, kLossTol);
  expect_weights_close(ep_z2, ep_z0, kWeightTol, /*dense=*/false);
}

TEST_F(HybridRuns, Zero2EqualsOneProcessAndReduceScattersGradients) {
  const std::string ref = run("ref", 1, "--set train.grad_accum=8");
  const std::string z1 = run("dp2pp2_z1", 4, "--set parallel.pp=2 --set parallel.zero=1");
  const std::string z2 = run("dp2pp2_z2", 4, "--set parallel.pp=2 --set parallel.zero=2");
  expect_losses_close(z2, ref, kLossTol);
  expect_weights_close(z2, ref, kWeightTol);
  expect_losses_close(z2, z1, kLossTol);
  EXPECT_EQ(summary_of(z2)["zero"], 2);
  EXPECT_EQ(state_floats(z2), state_floats(z1));  // the same optimizer-state split

  // Rank 0 (pp 0, dp 0) exchanges its chunk's G gradient floats each step. ZeRO-1's ring
  // all-reduce over dp = 2 sends G floats; ZeRO-2's reduce-scatter of blocks padded to the
  // longest range L sends L (the other rank's block); both then all-gather the same parameters.
  // With AdamW (two state floats per parameter): G = the zero = 1 state of the two dp ranks / 2,
  // L = the larger of the two / 2. ZeRO-2 also all-reduces one float of squares per step.
  const std::vector<int64_t> s1 = state_floats(z1);
  ASSERT_EQ(s1.size(), 4u);
  const int64_t G = (s1[0] + s1[1]) / 2, L = std::max(s1[0], s1[1]) / 2;
  const int64_t saved = sent_bytes(z1) - sent_bytes(z2);
  const int64_t expected = 10 * 4 * (G - L);
  std::printf("rank 0 sent %lld bytes at zero = 1, %lld at zero = 2 (%lld fewer; expected %lld)\n",
              static_cast<long long>(sent_bytes(z1)), static_cast<long long>(sent_bytes(z2)),
              static_cast<long long>(saved), static_cast<long long>(expected));
  EXPECT_GT(expected, 0);
  EXPECT_GE(saved, expected * 9 / 10);
  EXPECT_LE(saved, expected * 11 / 10);

  // dp2 x tp2: the norm from the owned tensors is tp-aware (replicated tensors counted once).
  const std::string tp = run("dp2tp2_z2", 4, "--set parallel.tp=2 --set parallel.zero=2");
  expect_losses_close(tp, ref, kLossTol);
  expect_weights_close(tp, ref, kWeightTol);
}

TEST_F(HybridRuns, Zero1StopAndResumeEqualsUninterruptedAcrossZeroStages) {
  const std::string layout = "--set parallel.pp=2 --set train.ckpt_every=3 ";
  const std::string z1 = "--set parallel.zero=1 ";
  const std::string whole = run("whole", 4, layout + z1);
  // Stopped after step 4 (checkpoint of step 4) and resumed, still zero = 1: bitwise.
  run("split", 4, layout + z1 + "--set run.stop_after=4");
  EXPECT_EQ(losses(dir_ + "/split/hy").size(), 4u);
  const std::string split = run("split", 4, layout + z1);
  EXPECT_EQ(losses(split), losses(whole));
  expect_weights_close(split, whole, 0.0);
  // A zero = 1 checkpoint continued under zero = 0, and a zero = 0 one under zero = 1: the
  // state of every tensor is found under the same name whoever owned it.
  run("to0", 4, layout + z1 + "--set run.stop_after=4");
  const std::string to0 = run("to0", 4, layout);
  EXPECT_EQ(losses(to0), losses(whole));
  expect_weights_close(to0, whole, 0.0);
  run("to1", 4, layout + "--set run.stop_after=4");
  const std::string to1 = run("to1", 4, layout + z1);
  EXPECT_EQ(losses(to1), losses(whole));
  expect_weights_close(to1, whole, 0.0);
  // A zero = 2 checkpoint (the same pieces) continued under zero = 1.
  run("from2", 4, layout + "--set parallel.zero=2 --set run.stop_after=4");
  const std::string from2 = run("from2", 4, layout + z1);
  expect_losses_close(from2, whole, kLossTol);
  expect_weights_close(from2, whole, kWeightTol);
}

TEST_F(HybridRuns, ZeroUnsupportedCombinationsRejectedBeforeLaunch) {
  struct Case {
    std::string set;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"--set parallel.pp=2 --set parallel.zero=3", {"parallel.zero = 3", "not supported"}},
  };
  for (const Case& c : cases) {
    const std::string cmd = command("bad", 4, c.set);
    auto r = run_command(cmd, 60);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    for (const auto& e : c.expect)
      EXPECT_NE(r.output.find(e), std::string::npos) << e << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad")) << cmd;
  }
}

}  // namespace
}  // namespace brigade
