// Silent corruption, end to end (issue: one flipped bit in a checkpoint's manifest.json made a
// resume load the wrong data, exit 0). Every byte a resume reads is now checked, so a flipped
// bit in the newest checkpoint's manifest, or in `latest`, is reported and the run resumes
// from the newest checkpoint that is intact; the result equals a run that never stopped, bit
// for bit.
//
// The trainer runs in this process (one rank): 6 of 8 steps with a checkpoint every 2, then one bit
// of the step-6 checkpoint (or of `latest`) is flipped and the run continues to step 8.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "brigade/base/file_io.h"
#include "brigade/runtime/config.h"
#include "brigade/train/trainer.h"
#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade::testing::checkpoint_integrity_fault_test {
namespace {

const std::string kConfig = tiny_gpt_config({{"train.ckpt_every", "2"},
                                             {"train.keep_checkpoints", "5"},
                                             {"train.async_checkpoint", "false"}});

class CheckpointIntegrity : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("ckpt-integrity"); }

  // Trains toward 8 steps, stopping after `steps` (run.stop_after), so that both legs of a
  // resumed run follow the uninterrupted run's learning-rate schedule.
  int train_run(const std::string& out, int64_t steps) {
    Config config = parse_config(kConfig, "test",
                                 {"run.out_dir=" + dir_ + "/" + out, "train.steps=8",
                                  "run.stop_after=" + std::to_string(steps == 8 ? 0 : steps)});
    config.validate();
    return train(config);
  }
  std::string root(const std::string& out) const { return dir_ + "/" + out + "/tiny"; }
  std::string ckpt(const std::string& out, const char* step) const {
    return root(out) + "/checkpoints/step_0000000" + step;
  }

  // Flips one bit of the first occurrence of `what` in file, at character offset `at` of it.
  static void flip_bit(const std::string& file, const std::string& what, size_t at, int bit) {
    std::string text = read_file(file);
    const size_t pos = text.find(what);
    ASSERT_NE(pos, std::string::npos) << what << " not in " << file;
    text[pos + at] = static_cast<char>(text[pos + at] ^ (1 << bit));
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  }

  // Continues `out` to step 8 and checks that it resumed from `resumed_step` and ended where
  // the uninterrupted reference did.
  void expect_resumes_from(const std::string& out, const char* resumed_step,
                           const std::string& rejected) {
    ASSERT_EQ(train_run(out, 8), 0);
    const std::string log = read_file(root(out) + "/train.log");
    EXPECT_NE(log.find("resumed from " + ckpt(out, resumed_step) + " at step"), std::string::npos)
        << log;
    if (!rejected.empty()) {
      EXPECT_NE(log.find(rejected), std::string::npos) << log;
    }
    // metrics.jsonl: the steps trained twice are marked, so each step counts once.
    std::map<int64_t, int> live;
    std::istringstream metrics(read_file(root(out) + "/metrics.jsonl"));
    std::string line;
    while (std::getline(metrics, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("type") == "train" && !j.value("superseded", false)) ++live[j.at("step")];
    }
    EXPECT_EQ(live.size(), 8u);
    for (const auto& [step, n] : live) EXPECT_EQ(n, 1) << "step " << step;
    for (auto part : {CkptPart::kModel, CkptPart::kState}) {
      const auto want = read_checkpoint(ckpt("reference", "8"), part);
      ASSERT_FALSE(want.empty());
      EXPECT_TRUE(read_checkpoint(ckpt(out, "8"), part) == want) << "part " << int(part);
    }
  }

  std::string dir_;
};

// "updates": 6 -> 4 (0x36 -> 0x34): AdamW's bias correction would silently use the wrong step.
TEST_F(CheckpointIntegrity, FlippedBitInTheManifestsUpdateCountFallsBack) {
  ASSERT_EQ(train_run("reference", 8), 0);
  ASSERT_EQ(train_run("run", 6), 0);
  flip_bit(ckpt("run", "6") + "/manifest.json", "\"updates\": 6", 11, 1);
  expect_resumes_from("run", "4", "step_00000006/manifest.json: the manifest's checksum");
}

// A piece's key "h.0.ln_2.bias" -> "h.1.ln_2.bias": the tensor would be read from another one.
TEST_F(CheckpointIntegrity, FlippedBitInATensorKeyFallsBack) {
  ASSERT_EQ(train_run("reference", 8), 0);
  ASSERT_EQ(train_run("run", 6), 0);
  flip_bit(ckpt("run", "6") + "/manifest.json", "\"key\": \"h.0.ln_2.bias\"", 10, 0);
  expect_resumes_from("run", "4", "step_00000006/manifest.json: the manifest's checksum");
}

// A torn manifest (its end lost) is caught the same way.
TEST_F(CheckpointIntegrity, TruncatedManifestFallsBack) {
  ASSERT_EQ(train_run("reference", 8), 0);
  ASSERT_EQ(train_run("run", 6), 0);
  const std::string m = ckpt("run", "6") + "/manifest.json";
  const std::string text = read_file(m);
  std::ofstream(m, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() - 20);
  expect_resumes_from("run", "4", "step_00000006/manifest.json");
}

// `latest` "step_00000006" -> "step_00000004" would silently redo two steps from an older,
// valid checkpoint; its CRC rejects it and the newest intact checkpoint is used.
TEST_F(CheckpointIntegrity, FlippedBitInLatestIsRejected) {
  ASSERT_EQ(train_run("reference", 8), 0);
  ASSERT_EQ(train_run("run", 6), 0);
  flip_bit(root("run") + "/checkpoints/latest", "step_00000006", 12, 1);
  expect_resumes_from("run", "6", "latest: does not name a checkpoint folder");
}

}  // namespace
}  // namespace brigade::testing::checkpoint_integrity_fault_test
