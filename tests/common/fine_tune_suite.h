#pragma once
// The fixture of the fine-tuning tests (train.freeze, LoRA): once per suite, a source run of the
// tiny GPT trained 6 steps; each test then fine-tunes it for 4 steps with Method's arguments in
// some layout and compares the runs with one another (common/same_training.h) and with the
// source's tensors. Method gives kName (the scratch folder's tag) and kArgs (the --set options
// of the method).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/checkpoint_tensors.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/same_training.h"
#include "common/tiny_gpt_config.h"

namespace brigade::testing {

template <class Method>
class FineTuneSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir(Method::kName);
    config_ = dir_ + "/run.toml";
    std::ofstream(config_) << tiny_gpt_config({{"train.steps", "6"},
                                               {"train.warmup", "1"},
                                               {"train.micro_batch", "8"},
                                               {"parallel.bucket_mb", "0.01"}});
    train("source", "");
    source_ = read_checkpoint(dir_ + "/source/checkpoints/step_00000006", CkptPart::kModel);
  }

  static CommandResult brigade(const std::string& args, int nproc = 1) {
    return run_brigade(args, nproc, 120);
  }
  static std::string train(const std::string& name, const std::string& extra, int nproc = 1) {
    const auto r = brigade(
        "train " + config_ + " --set run.out_dir=" + dir_ + " --set run.name=" + name + " " + extra,
        nproc);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
  // 4 steps of Method from the source; extra picks the layout.
  static std::string fine_tune(const std::string& name, const std::string& extra, int nproc = 1) {
    return train(name,
                 "--set train.init_from=" + dir_ + "/source --set train.steps=4 " +
                     std::string(Method::kArgs) + " " + extra,
                 nproc);
  }
  static std::string final_ckpt(const std::string& name) {
    return dir_ + "/" + name + "/checkpoints/step_00000004";
  }
  // Each step's `key` ("loss", "grad_norm").
  static std::vector<double> per_step(const std::string& name, const char* key = "loss") {
    return train_series(dir_ + "/" + name + "/metrics.jsonl", key);
  }
  // Same losses and gradient norms (1e-5 relative) and weights (1e-5 of the largest).
  static void expect_same_training(const std::string& a, const std::string& b) {
    testing::expect_same_training(dir_ + "/" + a, final_ckpt(a), dir_ + "/" + b, final_ckpt(b), 4);
  }

  static inline std::string dir_, config_;
  static inline std::map<std::string, WholeTensor> source_;
};

}  // namespace brigade::testing
