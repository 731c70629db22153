// train.init_from (issue 18): a run that starts from another run's weights trains exactly like a
// run started from the same weights by hand (exported to Hugging Face and imported, an
// independent path: its own files and loader), in any layout (tp = 2 on two processes equals
// one process), with a fresh optimizer and step 0; once the run has its own checkpoint the
// source is not read again; a missing source or another model's shape is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

class InitFrom : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("init-from");
    config_ = dir_ + "/run.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", "6"}, {"train.warmup", "1"}, {"model.n_head", "2"}});
  }
  static testing::CommandResult brigade(const std::string& args, int nproc = 1) {
    return testing::run_brigade(args, nproc, 180);
  }
  std::string train(const std::string& name, const std::string& extra, int nproc = 1) {
    const auto r = brigade(
        "train " + config_ + " --set run.out_dir=" + dir_ + " --set run.name=" + name + " " + extra,
        nproc);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
  std::vector<double> losses(const std::string& name) {
    return testing::train_series(dir_ + "/" + name + "/metrics.jsonl");
  }
  std::string dir_, config_;
};

TEST_F(InitFrom, EqualsTheSameWeightsImportedByHandInAnyLayout) {
  train("source", "");
  const std::string from = "--set train.init_from=" + dir_ + "/source --set train.steps=3";
  const std::string out = train("fine", from);
  EXPECT_NE(out.find("weights from " + dir_ + "/source/checkpoints/step_00000006 (its step 6)"),
            std::string::npos)
      << out;

  // The reference: the same weights through export and import, then trained from their step 0.
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/source --out " + dir_ + "/hf").exit_code, 0);
  const auto imported = brigade("import --from " + dir_ + "/hf --config " + config_ +
                                " --set run.out_dir=" + dir_ + " --set run.name=by-hand");
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  train("by-hand", "--set train.steps=3");
  const auto fine = losses("fine"), by_hand = losses("by-hand");
  ASSERT_EQ(fine.size(), 3u);
  EXPECT_EQ(fine, by_hand) << "init_from and import + train differ";
  // Not the source's own continuation: its first loss is the trained model's, far below a fresh
  // model's.
  EXPECT_LT(fine.front(), losses("source").front() - 0.3);

  // Into tensor parallelism on two processes: the same steps, to f32 summation order.
  train("fine-tp2", from + " --set parallel.tp=2", 2);
  const auto tp2 = losses("fine-tp2");
  ASSERT_EQ(tp2.size(), 3u);
  for (size_t i = 0; i < tp2.size(); ++i) EXPECT_NEAR(tp2[i], fine[i], 1e-5 * fine[i]) << i;
  // Into ZeRO-3 on two replicas, where each rank reads only its own shard of the weights (rank
  // 0's must not overwrite the others'): equal to one process with the same global batch.
  train("fine-zero3", from + " --set parallel.zero=3", 2);
  train("fine-batch8", from + " --set train.micro_batch=8");
  const auto zero3 = losses("fine-zero3"), batch8 = losses("fine-batch8");
  ASSERT_EQ(zero3.size(), 3u);
  ASSERT_EQ(batch8.size(), 3u);
  for (size_t i = 0; i < zero3.size(); ++i) {
    EXPECT_NEAR(zero3[i], batch8[i], 1e-5 * batch8[i]) << i;
  }

  // Straight from the Hugging Face folder (hf:DIR, no import): the same weights, so the same
  // steps bitwise; and into tp = 2, each rank taking its shards of the whole file.
  const std::string hf = "--set train.init_from=hf:" + dir_ + "/hf --set train.steps=3";
  train("fine-hf", hf);
  EXPECT_EQ(losses("fine-hf"), fine) << "init_from = hf: and import + train differ";
  train("fine-hf-tp2", hf + " --set parallel.tp=2", 2);
  const auto hf_tp2 = losses("fine-hf-tp2");
  ASSERT_EQ(hf_tp2.size(), 3u);
  for (size_t i = 0; i < hf_tp2.size(); ++i) EXPECT_NEAR(hf_tp2[i], fine[i], 1e-5 * fine[i]) << i;

  // Resumed, the run continues from its own checkpoint and says the source is not used.
  const std::string again = train("fine", from + " --set train.steps=4");
  EXPECT_NE(again.find("is not used: the run resumes from its own checkpoint"), std::string::npos)
      << again;
}

TEST_F(InitFrom, AMissingSourceOrAnotherShapeIsRefused) {
  const auto missing = brigade("train " + config_ + " --set run.out_dir=" + dir_ +
                               " --set train.init_from=" + dir_ + "/nothing");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("train.init_from"), std::string::npos) << missing.output;
  // A folder without a checkpoint (a run that saved none): refused before the run folder of
  // the new run is made, with the same missing-data code.
  std::filesystem::create_directories(dir_ + "/empty/checkpoints");
  const auto empty = brigade("train " + config_ + " --set run.out_dir=" + dir_ +
                             " --set run.name=from-empty --set train.init_from=" + dir_ + "/empty");
  EXPECT_EQ(empty.exit_code, 3) << empty.output;
  EXPECT_NE(empty.output.find("holds no checkpoint"), std::string::npos) << empty.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/from-empty")) << "a run folder was made";
  train("small", "--set train.steps=2");
  const auto shape = brigade(
      "train " + config_ + " --set run.out_dir=" + dir_ +
      " --set run.name=wide --set model.d_model=64 --set train.init_from=" + dir_ + "/small");
  EXPECT_EQ(shape.exit_code, 4) << shape.output;
  EXPECT_NE(shape.output.find("has shape"), std::string::npos) << shape.output;
  // hf: a folder that is not a Hugging Face model is missing data (3), before anything starts.
  const auto no_hf = brigade("train " + config_ + " --set run.out_dir=" + dir_ +
                             " --set run.name=no-hf --set train.init_from=hf:" + dir_ + "/small");
  EXPECT_EQ(no_hf.exit_code, 3) << no_hf.output;
  EXPECT_NE(no_hf.output.find("config.json is missing"), std::string::npos) << no_hf.output;
  // An HF model of another width: exit 4 naming the tensor.
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/small --out " + dir_ + "/hf-small").exit_code, 0);
  const auto hf_shape =
      brigade("train " + config_ + " --set run.out_dir=" + dir_ +
              " --set run.name=wide-hf --set model.d_model=64 --set train.init_from=hf:" + dir_ +
              "/hf-small");
  EXPECT_EQ(hf_shape.exit_code, 4) << hf_shape.output;
  EXPECT_NE(hf_shape.output.find("has shape"), std::string::npos) << hf_shape.output;
}

}  // namespace
}  // namespace brigade
