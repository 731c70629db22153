// Every ready config of configs/ runs as its header comment says (`brigade launch --nproc N --
// train configs/X.toml`), shortened to a few steps. The layouts that promise the default job's
// global batch (tp, pp under each schedule, zero3, the 3-D hybrid, ep against its own one-process
// form) are held to the one-process run step by step: the same examples, the same mean loss,
// only f32 summation orders differ (tests/hybrid/hybrid_train_mp_test.cc measures 1e-7 relative
// on a smaller GPT; we allow 1e-5 over 3 steps). The low-communication configs train on their
// own replica's data between syncs, so no one-process run equals them: they must finish, with
// finite losses that fall.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/metrics_records.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::metrics_records;
using testing::run_command;

constexpr int kSteps = 3;
constexpr double kLossTol = 1e-5;

class FeatureConfigs : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("feature-configs"); }

  // Runs configs/<config>.toml on nproc processes as run `name`; returns its per-step losses.
  std::vector<double> run(const std::string& config, int nproc, const std::string& name,
                          const std::string& extra = "", int steps = kSteps) {
    const std::string cmd =
        std::string(BRIGADE_BINARY) + " launch --nproc " + std::to_string(nproc) + " -- train " +
        BRIGADE_SOURCE_DIR + "/configs/" + config + ".toml --set run.out_dir=" + dir_ +
        " --set run.name=" + name + " --set train.steps=" + std::to_string(steps) +
        " --set train.warmup=1 --set train.eval_every=0 --set train.eval_batches=2"
        " --set train.ckpt_every=0 --set train.log_every=1 " +
        extra;
    const auto r = run_command(cmd, 240);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    std::vector<double> losses;
    for (const auto& j : metrics_records(dir_ + "/" + name + "/metrics.jsonl", "train")) {
      losses.push_back(j.at("loss").get<double>());
    }
    EXPECT_EQ(losses.size(), static_cast<size_t>(steps)) << cmd;
    return losses;
  }

  static void expect_equal_runs(const std::vector<double>& x, const std::vector<double>& ref,
                                const std::string& what) {
    ASSERT_EQ(x.size(), ref.size()) << what;
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - ref[i]) / ref[i]);
      EXPECT_LE(std::abs(x[i] - ref[i]), kLossTol * ref[i])
          << what << " step " << i + 1 << ": " << x[i] << " vs " << ref[i];
    }
    std::printf("%s: max relative loss difference to one process %.3g\n", what.c_str(), worst);
  }

  static void expect_learning(const std::vector<double>& x, const std::string& what) {
    ASSERT_FALSE(x.empty()) << what;
    for (double l : x) EXPECT_TRUE(std::isfinite(l)) << what;
    EXPECT_LT(x.back(), x.front()) << what;
  }

  std::string dir_;
};

TEST_F(FeatureConfigs, ModelParallelConfigsEqualTheDefaultJob) {
  const auto ref = run("default", 1, "ref");
  expect_equal_runs(run("tp", 2, "tp"), ref, "tp.toml");
  expect_equal_runs(run("tp", 2, "tp-sp", "--set parallel.sequence_parallel=true"), ref,
                    "tp.toml, sequence parallel");
  expect_equal_runs(run("pp", 2, "pp-1f1b"), ref, "pp.toml, 1f1b");
  expect_equal_runs(run("pp", 2, "pp-gpipe", "--set parallel.schedule=gpipe"), ref,
                    "pp.toml, gpipe");
  expect_equal_runs(run("pp", 2, "pp-zb", "--set parallel.schedule=zb-h1"), ref, "pp.toml, zb-h1");
  expect_equal_runs(run("pp", 2, "pp-interleaved",
                        "--set parallel.schedule=interleaved --set parallel.virtual_stages=2"),
                    ref, "pp.toml, interleaved");
  expect_equal_runs(run("hybrid-3d", 8, "hybrid"), ref, "hybrid-3d.toml");
}

TEST_F(FeatureConfigs, ZeroAndExpertParallelConfigsEqualOneProcess) {
  expect_equal_runs(run("zero3", 2, "zero3"), run("default", 1, "ref"), "zero3.toml");
  // The one-process form its header gives: every expert local, one micro-batch of 16.
  const auto moe_ref = run("moe", 1, "moe-ref", "--set parallel.ep=1 --set train.micro_batch=16");
  expect_equal_runs(run("moe", 2, "moe"), moe_ref, "moe.toml");
}

TEST_F(FeatureConfigs, LowCommunicationConfigsTrain) {
  // Syncs within the shortened run: DiLoCo's outer step after 2 local steps (the streaming
  // config's 4 fragments need at least 4).
  expect_learning(run("diloco", 2, "diloco", "--set sync.inner_steps=2", 4), "diloco.toml");
  expect_learning(run("streaming-diloco", 2, "streaming", "--set sync.inner_steps=4", 8),
                  "streaming-diloco.toml");
  expect_learning(run("demo", 2, "demo"), "demo.toml");
  expect_learning(run("powersgd", 2, "powersgd"), "powersgd.toml");
}

}  // namespace
}  // namespace brigade
