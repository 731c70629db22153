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

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

const char* kConfig = R"(
[run]
name = "hy"
seed = 5
[model]
vocab = 256
seq_len = 16
d_model = 32
n_layer = 4
n_head = 4
[train]
micro_batch = 2
grad_accum = 4
steps = 10
lr = 3e-3
min_lr = 3e-4
warmup = 2
eval_every = 5
eval_batches = 3
ckpt_every = 0
)";

class HybridRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("hybrid");
    config_ = dir_ + "/hy.toml";
    std::ofstream(config_) << kConfig;
  }

  std::string command(const std::string& name, int nproc, const std::string& extra) const {
    return std::string(BRIGADE_BINARY) + " launch --nproc " + std::to_string(nproc) + " -- train " +
           config_ + " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
  }

  // Runs the config on nproc processes into <dir>/<name>; returns the run folder.
  std::string run(const std::string& name, int nproc, const std::string& extra) {
    const std::string cmd = command(name, nproc, extra);
    auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    return dir_ + "/" + name + "/hy";
  }

  static std::vector<double> series(const std::string& run, const char* key, const char* marker) {
    std::vector<double> out;
    std::ifstream in(run + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains(marker) && j.contains(key)) out.push_back(j[key].get<double>());
    }
    return out;
  }
  static std::vector<double> losses(const std::string& run) {
    return series(run, "loss", "tokens_per_s");
  }

  static void expect_losses_close(const std::string& a, const std::string& ref, double tol) {
    const auto x = losses(a), y = losses(ref);
    ASSERT_EQ(x.size(), 10u) << a;
    ASSERT_EQ(y.size(), 10u) << ref;
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - y[i]) / y[i]);
      EXPECT_LE(std::abs(x[i] - y[i]), tol * y[i])
          << "step " << i + 1 << ": " << x[i] << " vs " << y[i];
    }
    std::printf("%s: max relative loss difference %.3g\n", a.c_str(), worst);
    // Validation passes (steps 5 and 10) agree as well.
    const auto va = series(a, "val_loss", "val_examples"),
               vb = series(ref, "val_loss", "val_examples");
    ASSERT_EQ(va.size(), vb.size());
    ASSERT_FALSE(va.empty());
    for (size_t i = 0; i < va.size(); ++i) EXPECT_LE(std::abs(va[i] - vb[i]), tol * vb[i]);
  }

  // The final weights of two runs' latest checkpoints, by GPT-2 name, whatever their format.
  static void expect_weights_close(const std::string& a, const std::string& ref, double tol) {
    auto ra = ShardedCheckpointReader::open_latest_valid(a + "/checkpoints");
    auto rb = ShardedCheckpointReader::open_latest_valid(ref + "/checkpoints");
    ASSERT_TRUE(ra && rb);
    const std::vector<std::string> names = {"wte.weight",
                                            "wpe.weight",
                                            "h.0.attn.c_attn.weight",
                                            "h.1.mlp.c_fc.weight",
                                            "h.2.attn.c_proj.weight",
                                            "h.3.mlp.c_proj.weight",
                                            "h.3.ln_2.weight",
                                            "ln_f.weight",
                                            "ln_f.bias"};
    double max_ref = 0, max_diff = 0;
    std::string worst;
    for (const auto& [name, entry] : rb->index().tensors) {
      if (name.find('/') != std::string::npos || name.rfind("adamw", 0) == 0) continue;
      ASSERT_TRUE(ra->contains(name)) << name;
      int64_t n = 1;
      for (int64_t d : entry.shape) n *= d;
      std::vector<float> x(n), y(n);
      ra->read_f32(name, Region::whole(entry.shape), x.data(), n);
      rb->read_f32(name, Region::whole(entry.shape), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(y[i])));
        const double d = std::abs(static_cast<double>(x[i]) - y[i]);
        if (d > max_diff) {
          max_diff = d;
          worst = name;
        }
      }
    }
    for (const auto& name : names) EXPECT_TRUE(rb->contains(name)) << name;
    std::printf("%s: max weight difference %.3g of max |w| %.3g (%s)\n", a.c_str(), max_diff,
                max_ref, worst.c_str());
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_diff, tol * max_ref) << "worst tensor " << worst;
  }

  std::string dir_, config_;
};

constexpr double kLossTol = 1e-5;
constexpr double kWeightTol = 5e-5;

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
      {4, "--set parallel.tp=2 --set sync.method=diloco", {"sync.method", "parallel.tp = 2"}},
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

}  // namespace
}  // namespace brigade
