// `brigade train configs/fashion-mnist-cnn.toml` as a user runs it, on the real Fashion-MNIST: a
// few steps on one process (loss, accuracy, the resolved widths in the run folder), and DDP on
// two processes, which must equal the one-process run of the same global batch step by step and
// all-reduce the CNN's whole gradient, 44,426 floats.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/metrics_records.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::run_command;

constexpr int64_t kCnnParams = 44426;
constexpr int kSteps = 4;

class CnnTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("cnn-train");
    ASSERT_FALSE(dir_.empty());
  }
  // `prefix` train <the shipped config> with a short schedule; a fixed peak skips the GEMM
  // calibration, two validation batches keep the end quick.
  testing::CommandResult train(const std::string& prefix, const std::string& out,
                               const std::string& extra) {
    return run_command(std::string(BRIGADE_BINARY) + " " + prefix + " train " +
                           std::string(BRIGADE_SOURCE_DIR) +
                           "/configs/fashion-mnist-cnn.toml --set run.out_dir=" + dir_ + "/" + out +
                           " --set train.steps=" + std::to_string(kSteps) +
                           " --set train.eval_every=0 --set train.eval_batches=2"
                           " --set train.ckpt_every=0 --set monitor.peak_flops=1e12 " +
                           extra,
                       120);
  }
  std::string run_dir(const std::string& out) const {
    return dir_ + "/" + out + "/fashion-mnist-cnn";
  }
  std::vector<nlohmann::json> records(const std::string& out, const char* type) const {
    return testing::metrics_records(run_dir(out) + "/metrics.jsonl", type);
  }
  std::string dir_;
};

TEST_F(CnnTrain, OneProcessTrainsAndReportsAccuracy) {
  const auto r = train("", "one", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("model cnn: 44426 parameters"));
  const auto steps = records("one", "train");
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (const auto& s : steps) {
    const double loss = s["loss"].get<double>();
    EXPECT_TRUE(std::isfinite(loss) && loss > 0.0 && loss < 5.0) << s.dump();
  }
  const auto evals = records("one", "eval");
  ASSERT_EQ(evals.size(), 1u);
  const double accuracy = evals[0]["val_accuracy"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_EQ(evals[0]["val_examples"].get<double>(), 2 * 64);
  // The resolved config records the widths the run used.
  std::ifstream resolved(run_dir("one") + "/config.toml");
  std::stringstream text;
  text << resolved.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("kind = \"cnn\""));
  EXPECT_THAT(text.str(), HasSubstr("channels = [6, 16]"));
  EXPECT_THAT(text.str(), HasSubstr("hidden = [120, 84]"));
}

TEST_F(CnnTrain, DdpOnTwoProcessesEqualsOneProcessOfTheSameGlobalBatch) {
  // Global batch 64 both ways: 64 on one rank, or 32 on each of two. A constant lr of 0.1
  // makes every step's update show in the next loss (by ~1e-2), so an update from one rank's
  // half of the batch would miss the tolerance by orders of magnitude.
  const std::string lr = "--set train.lr=0.1 --set train.min_lr=0.1";
  const auto one = train("", "one", lr);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = train("launch --nproc 2 --", "two", lr + " --set train.micro_batch=32");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto a = records("one", "train"), b = records("two", "train");
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    // Halved GEMM widths round differently: 1e-7 apart measured.
    const double la = a[i]["loss"].get<double>(), lb = b[i]["loss"].get<double>();
    EXPECT_NEAR(lb, la, 1e-5 * la) << "step " << i + 1;
    // Every gradient element crosses the wire once per step (a 2-rank ring sends the buffer).
    const int64_t sent = b[i]["comm_sent_by"].value("dp/all_reduce", int64_t{0});
    EXPECT_GE(sent, 4 * kCnnParams) << b[i].dump();
    EXPECT_LE(sent, 4 * kCnnParams + 64) << b[i].dump();
  }
}

}  // namespace
}  // namespace brigade
