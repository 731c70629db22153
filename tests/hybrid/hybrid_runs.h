#pragma once
// The fixture of the hybrid-mesh CLI tests (hybrid_train_mp_test.cc, hybrid_zero_mp_test.cc):
// a small GPT config, runs through `brigade launch ... train`, and comparisons of their losses
// and final weights against a reference run. The tolerances are explained in
// hybrid_train_mp_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/ckpt/region.h"
#include "brigade/ckpt/sharded_reader.h"
#include "common/run_command.h"

namespace brigade {

using testing::make_temp_dir;
using testing::run_command;

inline const char* kConfig = R"(
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

  // A GPT-2 parameter's name, not a piece of optimizer or sync-method state ("adamw.m/wte.weight",
  // "replica1.params/...", "powersgd.q").
  static bool is_parameter(const std::string& name) {
    if (name.find('/') != std::string::npos) return false;
    for (const char* p : {"wte.", "wpe.", "h.", "ln_f."})
      if (name.rfind(p, 0) == 0) return true;
    return false;
  }

  // The final weights of two runs' latest checkpoints, by GPT-2 name, whatever their format.
  // dense: the reference must hold the dense GPT-2 tensors listed below (not a MoE model's).
  static void expect_weights_close(const std::string& a, const std::string& ref, double tol,
                                   bool dense = true) {
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
      if (!is_parameter(name)) continue;
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
    for (const auto& name : names) EXPECT_TRUE(!dense || rb->contains(name)) << name;
    std::printf("%s: max weight difference %.3g of max |w| %.3g (%s)\n", a.c_str(), max_diff,
                max_ref, worst.c_str());
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_diff, tol * max_ref) << "worst tensor " << worst;
  }

  std::string dir_, config_;
};

inline constexpr double kLossTol = 1e-5;
inline constexpr double kWeightTol = 5e-5;

}  // namespace brigade
