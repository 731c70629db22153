// The hybrid mesh end to end through the real CLI (`brigade launch ... train`): a model-parallel
// run equals the single-process run of the same global batch, step by step.
//
// The global batch is micro_batch x m x dp examples per step. The reference is one process with
// train.grad_accum = m x dp: the sampler hands out the same examples (a step's examples do not
// depend on how many replicas share them, docs/architecture.md), the mean loss over them is the
// same, and so is the gradient. What differs is the order of f32 sums: a pipeline adds weight
// gradients micro-batch by micro-batch, tensor parallelism splits matmuls and all-reduces partial
// sums, dp averages replicas. Measured on this config: losses agree to 1e-7 relative (the
// float printed in metrics.jsonl), final weights to 5e-6 of the largest weight (after 10 AdamW
// steps, which amplify last-bit differences where a gradient is rounding noise). We require
// per step |loss - loss_ref| <= 1e-5 loss_ref (validation passes too) and, over every tensor by
// GPT-2 name, max |w - w_ref| <= 5e-5 max |w_ref|. A wrong gradient (an unsummed tied
// embedding, a replica fed other examples, a missing dp average) is off by orders more.
// Resumption of a model-parallel run is exact: stopped and resumed equals uninterrupted bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/ckpt/region.h"
#include "brigade/ckpt/sharded_reader.h"
#include "common/run_command.h"
#include "hybrid/hybrid_runs.h"

namespace brigade {
namespace {

TEST_F(HybridRuns, Dp2Tp2Pp2EqualsOneProcess) {
  const std::string ref = run("ref", 1, "--set train.grad_accum=8");
  const std::string hy = run("dp2tp2pp2", 8, "--set parallel.tp=2 --set parallel.pp=2");
  expect_losses_close(hy, ref, kLossTol);
  expect_weights_close(hy, ref, kWeightTol);
  // The last record is the summary, with the mesh it ran on.
  std::ifstream in(hy + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  EXPECT_EQ(
      nlohmann::json::parse(last)["mesh"].get<std::string>().rfind("pp=2 x dp=2 x ep=1 x tp=2", 0),
      0u)
      << last;
  // Resharding across layouts: the dp2 x tp2 x pp2 checkpoint of step 4 continues as
  // dp1 x tp1 x pp2 (8 micro-batches, the same global batch) like the one-process run.
  run("moved", 8,
      "--set parallel.tp=2 --set parallel.pp=2 --set run.stop_after=4 "
      "--set train.ckpt_every=4");
  const std::string moved =
      run("moved", 2, "--set parallel.pp=2 --set train.grad_accum=8 --set train.ckpt_every=4");
  expect_losses_close(moved, ref, kLossTol);
}

TEST_F(HybridRuns, Tp2AloneEqualsOneProcess) {
  const std::string ref = run("ref", 1, "");
  expect_losses_close(run("tp2", 2, "--set parallel.tp=2"), ref, kLossTol);
  expect_weights_close(dir_ + "/tp2/hy", ref, kWeightTol);
  expect_losses_close(run("tp2sp", 2, "--set parallel.tp=2 --set parallel.sequence_parallel=true"),
                      ref, kLossTol);
}

TEST_F(HybridRuns, Pp2AloneEqualsOneProcess) {
  const std::string ref = run("ref", 1, "");
  const std::string pp = run("pp2", 2,
                             "--set parallel.pp=2 --set parallel.schedule=interleaved "
                             "--set parallel.virtual_stages=2");
  expect_losses_close(pp, ref, kLossTol);
  expect_weights_close(pp, ref, kWeightTol);
  expect_losses_close(run("pp2zb", 2, "--set parallel.pp=2 --set parallel.schedule=zb-h1"), ref,
                      kLossTol);
}

// Mixture-of-experts blocks (every second block, 4 experts, top-2, capacity factor 1.25 so
// tokens are dropped) split over ep ranks, alone and inside a pipeline and under data
// parallelism. "ep is carved out of dp": the ep ranks of a group route their micro-batches
// together (MoE capacity is counted over the group's tokens), so the reference is one process
// whose micro-batch is the ep group's, ep x micro_batch examples, with m x dp micro-steps.
TEST_F(HybridRuns, ExpertParallelEqualsOneProcess) {
  // Validation on the same 8 examples routed in the same groups: 4 batches of 2 here, each
  // round's ep group holding what is one batch of 4 in the reference.
  const std::string moe =
      "--set model.n_experts=4 --set model.moe_every=2 --set model.moe_top_k=2 "
      "--set model.capacity_factor=1.25 ";
  const std::string ep_run = moe + "--set train.eval_batches=4 --set parallel.ep=2 ";
  const std::string ref_run = moe + "--set train.eval_batches=2 --set train.micro_batch=4 ";
  const std::string ref = run("ref", 1, ref_run);
  const std::string ep2 = run("ep2", 2, ep_run);
  expect_losses_close(ep2, ref, kLossTol);
  expect_weights_close(ep2, ref, kWeightTol, false);
  const std::string pp2ep2 =
      run("pp2ep2", 4, ep_run + "--set parallel.pp=2 --set parallel.schedule=zb-h1");
  expect_losses_close(pp2ep2, ref, kLossTol);
  expect_weights_close(pp2ep2, ref, kWeightTol, false);
  const std::string ref8 = run("ref8", 1, ref_run + "--set train.grad_accum=8");
  const std::string dp2ep2 = run("dp2ep2", 4, ep_run);
  expect_losses_close(dp2ep2, ref8, kLossTol);
  expect_weights_close(dp2ep2, ref8, kWeightTol, false);
  // Routing metrics: with dp = 1 rank 0 sees every routing group of the step, summed over the
  // pipeline's stages, so the dropped share equals the single process's.
  const auto dropped_ref = series(ref, "moe_dropped_pct", "tokens_per_s");
  ASSERT_EQ(dropped_ref.size(), 10u);
  EXPECT_GT(dropped_ref[0], 0.0);  // the capacity really binds
  for (const std::string& r : {ep2, pp2ep2}) {
    const auto dropped = series(r, "moe_dropped_pct", "tokens_per_s");
    ASSERT_EQ(dropped.size(), 10u) << r;
    for (size_t i = 0; i < dropped.size(); ++i) {
      EXPECT_NEAR(dropped[i], dropped_ref[i], 1e-4) << r << " step " << i + 1;
    }
  }
  // Resumable under another layout: experts are stored by global name, so the ep = 2 checkpoint
  // of step 5 continues as pp = 2 with every expert on each rank (micro-batch 4 = the ep group's).
  run("moved", 2, ep_run + "--set run.stop_after=5 --set train.ckpt_every=5");
  const std::string moved =
      run("moved", 2, ref_run + "--set parallel.pp=2 --set train.ckpt_every=5");
  expect_losses_close(moved, ref, kLossTol);
}

TEST_F(HybridRuns, InvalidLayoutsRejectedBeforeLaunch) {
  struct Case {
    int nproc;
    std::string set;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {6,
       "--set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=2",
       {"pp=2 x dp=2 x ep=1 x tp=2", "= 8", "world size 6"}},
      {3, "--set parallel.tp=3 --set parallel.dp=1", {"n_head", "pp=1 x dp=1 x ep=1 x tp=3"}},
      {4,
       "--set parallel.pp=4 --set parallel.schedule=interleaved --set parallel.virtual_stages=2",
       {"pp=4 x dp=1 x ep=1 x tp=1", "virtual_stages = 2"}},
      {4, "--set parallel.pp=2 --set parallel.layer_split=[3,2]", {"pp=2 x dp=2", "layer"}},
      {4,
       "--set parallel.tp=2 --set sync.method=diloco --set sync.quorum=0.5",
       {"sync.quorum", "parallel.tp = 2"}},
      {4, "--set parallel.tp=2 --set parallel.zero=3", {"parallel.zero", "parallel.tp = 2"}},
  };
  for (const Case& c : cases) {
    const std::string cmd = command("bad", c.nproc, c.set);
    auto r = run_command(cmd, 60);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    for (const auto& e : c.expect)
      EXPECT_NE(r.output.find(e), std::string::npos) << e << "\n" << r.output;
    // Refused before any worker started: no run folder.
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad")) << cmd;
  }
}

TEST_F(HybridRuns, StopAndResumeEqualsUninterrupted) {
  const std::string layout = "--set parallel.tp=2 --set parallel.pp=2 --set train.ckpt_every=3";
  const std::string whole = run("whole", 4, layout);
  run("split", 4, layout + " --set run.stop_after=4");
  EXPECT_EQ(losses(dir_ + "/split/hy").size(), 4u);
  const std::string split = run("split", 4, layout);
  EXPECT_EQ(losses(split), losses(whole));  // bitwise: every piece of state is restored
  expect_weights_close(split, whole, 0.0);
  // Across layouts: the pp2 x tp2 checkpoint of step 4 continues as tp2 alone.
  run("moved", 4, layout + " --set run.stop_after=4");
  const std::string moved = run("moved", 2, "--set parallel.tp=2 --set train.ckpt_every=3");
  expect_losses_close(moved, whole, kLossTol);
}

// The dp average overlaps the pipeline's backward (DataParallel, parallel/ddp.h): each bucket
// starts as the stage's last backward of the step finishes it, instead of after the schedule.
// The buckets and their order are the same either way, so the runs are bitwise equal; a bucket
// launched before its gradient was final would differ. Every step records the seconds it
// waited for the average (comm_exposed_ms).
TEST_F(HybridRuns, OverlappedDpAverageEqualsTheAverageAfterBackward) {
  for (const auto& [name, set] :
       {std::pair{"pp2", "--set parallel.pp=2"},
        std::pair{"pp2zb", "--set parallel.pp=2 --set parallel.schedule=zb-h1"},
        std::pair{"tp2", "--set parallel.tp=2 --set parallel.bucket_mb=0.01"}}) {
    const std::string on = run(std::string(name) + "_on", 4, set);
    const std::string off = run(std::string(name) + "_off", 4,
                                std::string(set) + " --set parallel.overlap_grad_reduce=false");
    EXPECT_EQ(losses(on), losses(off)) << name;
    expect_weights_close(on, off, 0.0);
    EXPECT_EQ(series(on, "comm_exposed_ms", "tokens_per_s").size(), 10u) << name;
  }
}

// A vocab that tp does not divide is padded to a multiple of tp on the ranks; the padding rows
// are not part of the checkpoint (wte and its optimizer state keep the model's shape), and the
// tp = 4 checkpoint (2 padding rows) continues as tp = 2 (none) like the uninterrupted run.
TEST_F(HybridRuns, PaddedVocabRowsAreNotSavedAndResumeUnderAnotherTp) {
  const std::string common = "--set model.vocab=258 --set train.ckpt_every=3";
  const std::string whole = run("pad_whole", 4, common + " --set parallel.tp=4");
  auto reader = ShardedCheckpointReader::open_latest_valid(whole + "/checkpoints");
  ASSERT_TRUE(reader);
  for (const char* name : {"wte.weight", "adamw.m/wte.weight", "adamw.v/wte.weight"}) {
    ASSERT_TRUE(reader->contains(name)) << name;
    EXPECT_EQ(reader->tensor(name).shape, (std::vector<int64_t>{258, 32})) << name;
  }
  run("pad_moved", 4, common + " --set parallel.tp=4 --set run.stop_after=4");
  const std::string moved = run("pad_moved", 2, common + " --set parallel.tp=2");
  expect_losses_close(moved, whole, kLossTol);
}

}  // namespace
}  // namespace brigade
