#pragma once
// Shared by the data-parallel (DDP and ZeRO) multi-process tests: run `brigade train` on N
// processes through `brigade launch`, read the per-step losses, and compare two runs' losses and
// checkpoints.
//
// Tolerance (as in ddp_equivalence_mp_test.cc): DDP and ZeRO compute the same sums, but a
// reduce-scatter adds the ranks' gradients in rank order where the ring all-reduce uses ring
// order, and the squared norm is summed shard by shard; f32 results can then differ in the last
// bits, and 20 AdamW steps carry that forward (Adam divides by sqrt(v), so an element whose
// gradient is rounding noise, like the attention key bias, moves by up to lr on noise alone).
// We require over the whole model max|a - b| <= 1e-5 * max|a| (the issue's bound, relative to
// the largest weight), for each optimizer state vector max|a - b| <= 1e-5 * max|a|, and per
// step |loss_a - loss_b| <= 1e-5 * loss_a. On 2 ranks without gradient accumulation the two
// sums are the same (a + b), and the runs agree bitwise in practice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/checkpoint_tensors.h"
#include "common/run_command.h"

namespace brigade::testing {

inline const char* kZeroConfig = R"(
[run]
name = "eq"
seed = 11
[model]
vocab = 256
seq_len = 32
d_model = 32
n_layer = 2
n_head = 2
[train]
micro_batch = 8
steps = 20
lr = 3e-3
min_lr = 3e-4
warmup = 2
eval_every = 0
eval_batches = 4
ckpt_every = 0
[parallel]
bucket_mb = 0.01
)";

class DpRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("zero");
    config_ = dir_ + "/eq.toml";
    std::ofstream(config_) << kZeroConfig;
  }

  // Runs the config on nproc processes into <dir>/<name>; returns the run folder.
  std::string run(const std::string& name, int nproc, const std::string& extra) {
    std::string out = dir_ + "/" + name;
    std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc " + std::to_string(nproc) +
                      " -- train " + config_ + " --set run.out_dir=" + out + " " + extra;
    auto r = run_command(cmd, 300);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    return out + "/eq";
  }

  // The validation loss of the final evaluation (ZeRO-3 gathers all parameters for it).
  static double final_val_loss(const std::string& run) {
    std::ifstream in(run + "/metrics.jsonl");
    std::string line;
    double val = -1;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("val_loss") && j.contains("final")) val = j["val_loss"].get<double>();
    }
    return val;
  }

  static std::vector<double> losses(const std::string& run) {
    std::vector<double> out;
    std::ifstream in(run + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("tokens_per_s")) out.push_back(j["loss"].get<double>());
    }
    return out;
  }

  // The tensors of checkpoint a equal those of checkpoint b within 1e-5 of the largest value:
  // the largest over the whole part (model weights: the issue's bound, as in the DDP test), or
  // over each state buffer (optimizer state: adamw.m and adamw.v, saved per tensor as
  // "adamw.m/<tensor>", are each compared over the whole flat space, since they are on very
  // different scales). file names the part as format 1 stored it: "model.safetensors"
  // (the parameters) or "optimizer.safetensors" (the rest of the state); the checkpoints are
  // read whole through the resharding reader, whatever layout wrote them.
  static void expect_same_file(const std::string& a, const std::string& b, const std::string& file,
                               bool per_tensor, double tol = 1e-5) {
    const CkptPart part = file == "model.safetensors" ? CkptPart::kModel : CkptPart::kState;
    const auto ta = read_checkpoint(a, part), tb = read_checkpoint(b, part);
    ASSERT_FALSE(ta.empty()) << a << ": no " << file;
    ASSERT_EQ(ta.size(), tb.size()) << file;
    struct Extent {
      double max_abs = 0, max_diff = 0;
      std::string worst;
    };
    std::map<std::string, Extent> groups;  // per buffer ("adamw.m"), or one for the whole part
    for (const auto& [name, x] : ta) {
      ASSERT_TRUE(tb.count(name)) << b << " lacks " << name;
      const WholeTensor& y = tb.at(name);
      ASSERT_EQ(x.shape, y.shape) << name;
      Extent& g = groups[per_tensor ? name.substr(0, name.find('/')) : ""];
      for (size_t i = 0; i < x.data.size(); ++i) {
        g.max_abs = std::max(g.max_abs, std::abs(static_cast<double>(x.data[i])));
        const double diff = std::abs(static_cast<double>(x.data[i]) - y.data[i]);
        if (diff > g.max_diff) {
          g.max_diff = diff;
          g.worst = name;
        }
      }
    }
    for (const auto& [buffer, g] : groups) {
      EXPECT_LE(g.max_diff, tol * g.max_abs) << file << ": largest difference in " << g.worst;
      EXPECT_GT(g.max_abs, per_tensor ? 0.0 : 0.5) << file << ": " << buffer;  // not vacuous
    }
  }

  // Same loss at every one of the 20 steps and the same final weights and optimizer state.
  // state_tol bounds the optimizer state (per vector, relative to its largest value). Where the
  // runs agree only to the weights' 1e-5, the state can differ more: AdamW's m and v follow the
  // last gradients, which are not damped by the learning rate as the weights are; so runs whose
  // reductions differ (3 or 4 ranks, or ZeRO-2/3 with accumulation, which reduce every
  // micro-step) use 1e-3 there, which still catches a shard gathered to the wrong place (an
  // O(1) error).
  // same_eval: both runs evaluated the same batches (validation uses micro-batches of
  // train.micro_batch, so runs with different micro-batches see different validation sets).
  // model_tol bounds the weights likewise (1e-5 unless a run's reductions differ on 3 ranks; see
  // its caller).
  static void expect_same_training(const std::string& a, const std::string& b,
                                   double state_tol = 1e-5, bool same_eval = true,
                                   double model_tol = 1e-5) {
    auto la = losses(a), lb = losses(b);
    ASSERT_EQ(la.size(), 20u) << a;
    ASSERT_EQ(lb.size(), 20u) << b;
    for (size_t i = 0; i < la.size(); ++i) {
      EXPECT_LE(std::abs(la[i] - lb[i]), 1e-5 * la[i]) << "step " << i + 1;
    }
    const double va = final_val_loss(a), vb = final_val_loss(b);
    EXPECT_GT(va, 0) << a;
    EXPECT_GT(vb, 0) << b;
    if (same_eval) {
      EXPECT_LE(std::abs(va - vb), 1e-5 * va) << "final validation loss";
    }
    const std::string ckpt = "/checkpoints/step_00000020";
    expect_same_file(a + ckpt, b + ckpt, "model.safetensors", /*per_tensor=*/false, model_tol);
    expect_same_file(a + ckpt, b + ckpt, "optimizer.safetensors", /*per_tensor=*/true, state_tol);
  }

  std::string dir_, config_;
};

}  // namespace brigade::testing
