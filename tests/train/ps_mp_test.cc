// Parameter servers end to end through `brigade launch` (sync.method = "ps"): the last
// ps.servers processes serve, the others train.
//
//   BSP equals DDP-SGD of the same global batch: N = 1, 2 and 4 workers with S = 1 or 2
//   servers, SGD with momentum and AdamW, clipping on: every step's loss and gradient norm, the
//   final validation loss, and the final checkpoint's weights and optimizer state within 1e-5
//   relative of DDP on N ranks (itself equal to one process, tests/parallel/).
//   SSP with staleness 0 equals BSP (plain SGD, where N pushes of lr / N are one BSP step), and
//   with ps.aggregate = N (one update per N pushes) for AdamW too.
//   SSP with a slowed worker applies no update staler than the bound (the server's record in
//   the metrics) and some at the bound; ASP trains the tiny GPT down.
//   Stop and resume under BSP equals the uninterrupted run bitwise, and a PS checkpoint
//   resumes as DDP.
//   Dynamic assignment: one worker, handed every slice in order, trains as static assignment
//   does, bitwise, also stopped and resumed; with a slowed worker the others take more slices,
//   every slice is applied once, and no update is staler than the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/checkpoint_tensors.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

constexpr int kSteps = 8;

struct RunResult {
  std::vector<double> loss, norm;
  double val_loss = 0;
  std::vector<nlohmann::json> train;
  std::string checkpoints;
};

class ParameterServers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("ps");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config({{"train.steps", std::to_string(kSteps)},
                                                        {"train.micro_batch", "2"},
                                                        {"train.grad_accum", "2"},
                                                        {"train.grad_clip", "0.5"},
                                                        {"train.log_every", "1"}});
  }

  RunResult run(const std::string& name, int nproc, const std::string& extra,
                const std::string& env = "", int expect_exit = 0) {
    const std::string cmd = env + std::string(BRIGADE_BINARY) + " launch --nproc " +
                            std::to_string(nproc) + " -- train " + config_ +
                            " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
    const auto r = run_command(cmd, 240);
    EXPECT_EQ(r.exit_code, expect_exit) << cmd << "\n" << r.output;
    RunResult out;
    const std::string folder = dir_ + "/" + name + "/tiny";
    out.train = testing::metrics_records(folder + "/metrics.jsonl", "train");
    for (const auto& j : out.train) {
      out.loss.push_back(j["loss"].get<double>());
      out.norm.push_back(j["grad_norm"].get<double>());
    }
    const auto evals = testing::metrics_records(folder + "/metrics.jsonl", "eval");
    if (!evals.empty()) out.val_loss = evals.back()["val_loss"].get<double>();
    out.checkpoints = folder + "/checkpoints";
    return out;
  }

  static std::string step_dir(const RunResult& r, int step) {
    char name[32];
    std::snprintf(name, sizeof name, "/step_%08d", step);
    return r.checkpoints + name;
  }

  static void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rel,
                           const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], rel * std::max(1.0, std::abs(b[i]))) << what << " at step " << i + 1;
    }
  }

  static void expect_same_checkpoint(const std::string& a, const std::string& b, double rel) {
    for (auto part : {testing::CkptPart::kModel, testing::CkptPart::kState}) {
      const auto ta = testing::read_checkpoint(a, part), tb = testing::read_checkpoint(b, part);
      ASSERT_EQ(ta.size(), tb.size());
      if (part == testing::CkptPart::kModel)
        ASSERT_FALSE(ta.empty());  // SGD without momentum: no state
      for (const auto& [name, t] : tb) {
        ASSERT_TRUE(ta.count(name)) << name;
        const auto& x = ta.at(name).data;
        ASSERT_EQ(x.size(), t.data.size()) << name;
        // Relative L2 error per tensor: AdamW moves an element whose gradient is at rounding
        // level by up to lr per step either way, so single elements may differ by more than
        // their sums' rounding (the servers add worker gradients in worker order, Gloo's ring
        // in its own); the tensor as a whole may not.
        double diff = 0, norm = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const double d = static_cast<double>(x[i]) - t.data[i];
          diff += d * d;
          norm += static_cast<double>(t.data[i]) * t.data[i];
        }
        EXPECT_LE(std::sqrt(diff), rel * std::max(std::sqrt(norm), 1e-6)) << name;
      }
    }
  }

  std::string dir_, config_;
};

TEST_F(ParameterServers, BspEqualsDdpOfTheSameGlobalBatch) {
  struct Case {
    int workers, servers;
    const char* optimizer;
  };
  for (const Case c :
       {Case{1, 1, "sgd"}, Case{2, 1, "adamw"}, Case{2, 2, "sgd"}, Case{4, 1, "adamw"}}) {
    const std::string tag =
        std::to_string(c.workers) + "w" + std::to_string(c.servers) + "s-" + c.optimizer;
    SCOPED_TRACE(tag);
    const std::string opt = std::string(" --set train.optimizer=") + c.optimizer;
    const RunResult ddp = run("ddp-" + tag, c.workers, opt);
    const RunResult ps =
        run("ps-" + tag, c.workers + c.servers,
            opt + " --set sync.method=ps --set ps.servers=" + std::to_string(c.servers));
    ASSERT_EQ(ps.loss.size(), static_cast<size_t>(kSteps));
    expect_close(ps.loss, ddp.loss, 1e-5, "loss");
    expect_close(ps.norm, ddp.norm, 1e-5, "grad norm");
    EXPECT_NEAR(ps.val_loss, ddp.val_loss, 1e-5 * ddp.val_loss);
    // AdamW divides by the root of the second moment, so a gradient that is zero up to rounding
    // (the attention key bias: softmax does not see it) moves by lr-sized steps of either
    // sign, whichever order the workers' gradients were summed in; SGD keeps such noise tiny.
    expect_same_checkpoint(step_dir(ps, kSteps), step_dir(ddp, kSteps),
                           std::string(c.optimizer) == "sgd" ? 1e-5 : 1e-4);
    // The servers' record: every update applied once per step, none stale; bytes counted.
    const nlohmann::json& last = ps.train.back();
    EXPECT_EQ(last["ps_updates_applied"].get<int64_t>(), kSteps);
    EXPECT_EQ(last["ps_staleness_max"].get<int64_t>(), 0);
    EXPECT_GT(last["comm_sent_by"]["ps/push"].get<int64_t>(), 0) << last.dump();
    EXPECT_GT(last["comm_recv_by"]["ps/pull"].get<int64_t>(), 0) << last.dump();
  }
}

TEST_F(ParameterServers, SspWithStalenessZeroEqualsBsp) {
  const std::string sgd =
      " --set sync.method=ps --set train.optimizer=sgd --set train.momentum=0 "
      "--set train.weight_decay=0 --set train.grad_clip=0";
  const RunResult bsp = run("bsp", 3, sgd);
  const RunResult ssp = run("ssp0", 3, sgd + " --set ps.consistency=ssp --set ps.staleness=0");
  // Under ssp each worker logs its own loss (workers do not wait for each other's): compared are
  // the weights and the validation loss, which every worker computes on its share.
  ASSERT_EQ(ssp.loss.size(), static_cast<size_t>(kSteps));
  EXPECT_NEAR(ssp.val_loss, bsp.val_loss, 1e-5 * bsp.val_loss);
  expect_same_checkpoint(step_dir(ssp, kSteps), step_dir(bsp, kSteps), 1e-5);
  EXPECT_EQ(ssp.train.back()["ps_staleness_max"].get<int64_t>(), 0);
}

// ps.aggregate = N: the server applies every N pushes as one step on their mean, and with s = 0
// those are exactly one clock's N pushes: bsp's update for AdamW too (clipping off: under ssp
// a worker clips its own gradient, under bsp the mean).
TEST_F(ParameterServers, SspWithStalenessZeroAndOneUpdatePerNPushesEqualsBspWithAdamW) {
  const std::string adamw =
      " --set sync.method=ps --set train.optimizer=adamw --set train.grad_clip=0";
  const RunResult bsp = run("bsp-adamw", 3, adamw);
  const RunResult ssp = run("ssp0-aggregate", 3,
                            adamw +
                                " --set ps.consistency=ssp --set ps.staleness=0 "
                                "--set ps.aggregate=2");
  ASSERT_EQ(ssp.loss.size(), static_cast<size_t>(kSteps));
  EXPECT_NEAR(ssp.val_loss, bsp.val_loss, 1e-5 * bsp.val_loss);
  expect_same_checkpoint(step_dir(ssp, kSteps), step_dir(bsp, kSteps), 1e-4);
  EXPECT_EQ(ssp.train.back()["ps_staleness_max"].get<int64_t>(), 0);
  EXPECT_EQ(ssp.train.back()["ps_updates_applied"].get<int64_t>(), 2 * kSteps);  // pushes
}

TEST_F(ParameterServers, SspBoundsTheStalenessOfASlowedWorker) {
  const RunResult ssp = run("ssp2", 3,
                            "--set sync.method=ps --set ps.consistency=ssp --set ps.staleness=2 "
                            "--set train.steps=16",
                            "env BRIGADE_FAULT_SLOW_RANK=1 BRIGADE_FAULT_SLOW_MS=40 ");
  ASSERT_EQ(ssp.train.size(), 16u);
  int64_t max = 0, applied = 0;
  for (const auto& j : ssp.train) max = std::max(max, j["ps_staleness_max"].get<int64_t>());
  applied = ssp.train.back()["ps_updates_applied"].get<int64_t>();
  EXPECT_LE(max, 2) << "an update staler than ps.staleness was applied";
  EXPECT_GE(max, 1) << "worker 0 never ran ahead of the slowed worker";
  EXPECT_GE(applied, 16) << "worker 0's own pushes at least";
}

TEST_F(ParameterServers, AspTrainsTheModelDown) {
  const RunResult asp = run("asp", 3,
                            "--set sync.method=ps --set ps.consistency=asp --set train.steps=30 "
                            "--set ps.staleness_lr=true");
  ASSERT_EQ(asp.loss.size(), 30u);
  EXPECT_LT(asp.loss.back(), asp.loss.front() - 0.5)
      << "loss " << asp.loss.front() << " -> " << asp.loss.back();
  EXPECT_TRUE(std::isfinite(asp.val_loss));
}

TEST_F(ParameterServers, StopAndResumeEqualsUninterruptedAndResumesAsDdp) {
  const std::string ps = " --set sync.method=ps --set ps.servers=2";
  const RunResult whole = run("whole", 4, ps);
  run("split", 4, ps + " --set run.stop_after=4");
  const RunResult resumed = run("split", 4, ps);
  ASSERT_EQ(resumed.loss.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(resumed.loss, whole.loss);
  EXPECT_EQ(resumed.norm, whole.norm);
  expect_same_checkpoint(step_dir(resumed, kSteps), step_dir(whole, kSteps), 0.0);
  // The same checkpoint of step 4, continued by DDP on two ranks.
  run("as-ddp", 4, ps + " --set run.stop_after=4");
  const RunResult ddp = run("as-ddp", 2, "");
  expect_close(std::vector<double>(ddp.loss.begin() + 4, ddp.loss.end()),
               std::vector<double>(whole.loss.begin() + 4, whole.loss.end()), 1e-5,
               "DDP continuing a PS checkpoint");
}

TEST_F(ParameterServers, DynamicAssignmentOfOneWorkerEqualsStatic) {
  const std::string ssp = " --set sync.method=ps --set ps.consistency=ssp --set ps.staleness=1";
  const RunResult fixed = run("static1", 2, ssp);
  const RunResult dynamic = run("dynamic1", 2, ssp + " --set ps.assignment=dynamic");
  ASSERT_EQ(dynamic.loss.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(dynamic.loss, fixed.loss);
  EXPECT_EQ(dynamic.norm, fixed.norm);
  EXPECT_EQ(dynamic.val_loss, fixed.val_loss);
  expect_same_checkpoint(step_dir(dynamic, kSteps), step_dir(fixed, kSteps), 0.0);
  // Stopped after 4 steps (worker 0 drains, saves) and resumed: the slices continue there.
  run("dynamic1-split", 2, ssp + " --set ps.assignment=dynamic --set run.stop_after=4");
  const RunResult resumed = run("dynamic1-split", 2, ssp + " --set ps.assignment=dynamic");
  EXPECT_EQ(resumed.loss, fixed.loss);
  expect_same_checkpoint(step_dir(resumed, kSteps), step_dir(fixed, kSteps), 0.0);
}

// Each worker's count of the slices it trained, from the summary table of its log.
int64_t slices_in_log(const std::string& log) {
  std::ifstream in(log);
  std::string line;
  int64_t n = -1;
  while (std::getline(in, line)) {
    const size_t at = line.find("ps_slices_trained");
    if (at != std::string::npos) n = std::stoll(line.substr(at + 17));
  }
  return n;
}

TEST_F(ParameterServers, DynamicAssignmentHandsTheSlowedWorkerFewerSlices) {
  constexpr int kWorkers = 3, kLongSteps = 16;
  const RunResult r = run("dynamic3", kWorkers + 1,
                          "--set sync.method=ps --set ps.consistency=ssp --set ps.staleness=2 "
                          "--set ps.assignment=dynamic --set train.steps=" +
                              std::to_string(kLongSteps),
                          "env BRIGADE_FAULT_SLOW_RANK=1 BRIGADE_FAULT_SLOW_MS=40 ");
  const std::string folder = dir_ + "/dynamic3/tiny";
  const auto summary = testing::metrics_records(folder + "/metrics.jsonl", "summary");
  ASSERT_EQ(summary.size(), 1u);
  // Every slice of the run applied once, and worker 0's final evaluation waited for all of them.
  EXPECT_EQ(summary[0]["ps_updates_applied"].get<int64_t>(), kWorkers * kLongSteps);
  std::vector<int64_t> slices = {slices_in_log(folder + "/train.log")};
  for (int w = 1; w < kWorkers; ++w) {
    slices.push_back(slices_in_log(folder + "/logs/rank_" + std::to_string(w) + ".log"));
  }
  EXPECT_EQ(slices[0], summary[0]["ps_slices_trained"].get<int64_t>());
  EXPECT_EQ(slices[0] + slices[1] + slices[2], kWorkers * kLongSteps);
  EXPECT_LT(slices[1], slices[0]) << "the slowed worker trained as many slices as worker 0";
  EXPECT_LT(slices[1], slices[2]);
  // Worker 0's records: one per slice, their steps never back, every update within the bound.
  ASSERT_EQ(r.train.size(), static_cast<size_t>(slices[0]));
  int64_t prev = 0, max = 0;
  for (const auto& j : r.train) {
    EXPECT_GE(j["step"].get<int64_t>(), prev);
    prev = j["step"].get<int64_t>();
    max = std::max(max, j["ps_staleness_max"].get<int64_t>());
  }
  EXPECT_LE(max, 2) << "an update staler than ps.staleness was applied";
  EXPECT_TRUE(std::isfinite(r.val_loss));
  // Under bsp every worker trains each step: nothing to hand out.
  run("dynamic-bsp", kWorkers + 1, "--set sync.method=ps --set ps.assignment=dynamic", "", 2);
}

// Checkpoints under ssp are consistent cuts (ps_server.h): with a slowed worker that the others
// would run ahead of, the checkpoint of step t holds exactly the t x N pushes of the steps before
// it (the servers' count, saved in the manifest), under static and dynamic assignment alike,
// and the final one every push of the run.
TEST_F(ParameterServers, SspCheckpointsAreConsistentCuts) {
  constexpr int kWorkers = 3, kLongSteps = 12, kEvery = 4;
  for (const std::string assignment : {"static", "dynamic"}) {
    SCOPED_TRACE(assignment);
    const RunResult r = run("cuts-" + assignment, kWorkers + 1,
                            "--set sync.method=ps --set ps.consistency=ssp --set ps.staleness=3 "
                            "--set train.keep_checkpoints=10 --set ps.assignment=" +
                                assignment + " --set train.steps=" + std::to_string(kLongSteps) +
                                " --set train.ckpt_every=" + std::to_string(kEvery),
                            "env BRIGADE_FAULT_SLOW_RANK=1 BRIGADE_FAULT_SLOW_MS=40 ");
    for (int step = kEvery; step <= kLongSteps; step += kEvery) {
      std::ifstream in(step_dir(r, step) + "/manifest.json");
      ASSERT_TRUE(in) << step_dir(r, step);
      const nlohmann::json ps = nlohmann::json::parse(in)["state"]["ps"];
      EXPECT_TRUE(ps["consistent_cut"].get<bool>()) << "step " << step;
      EXPECT_EQ(ps["updates_applied"].get<int64_t>(), kWorkers * step) << "step " << step;
    }
    int64_t max = 0;
    for (const auto& j : r.train) max = std::max(max, j["ps_staleness_max"].get<int64_t>());
    EXPECT_LE(max, 3);
  }
}

TEST_F(ParameterServers, AJobWithoutWorkersIsRefusedByName) {
  const auto r = run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config_ +
                             " --set run.out_dir=" + dir_ + "/none --set sync.method=ps " +
                             "--set ps.servers=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ps.servers = 2"), std::string::npos) << r.output;
  // More pushes per update than workers: refused before any process starts.
  const auto a = run_command(std::string(BRIGADE_BINARY) + " launch --nproc 3 -- train " + config_ +
                             " --set run.out_dir=" + dir_ +
                             "/aggregate --set sync.method=ps --set ps.consistency=asp " +
                             "--set ps.aggregate=3");
  EXPECT_EQ(a.exit_code, 2) << a.output;
  EXPECT_NE(a.output.find("ps.aggregate = 3"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("2 worker(s)"), std::string::npos) << a.output;
}

}  // namespace
}  // namespace brigade
