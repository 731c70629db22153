// train.freeze (issue 18, fine-tuning): the frozen tensors of a run leave it bitwise as they
// came in (from train.init_from, or from the initialisation), while every other tensor trains;
// frozen tensors get no optimizer state; two data-parallel processes equal one; DDP does not
// send frozen gradients; ZeRO-1/2/3, tensor and pipeline parallelism keep the frozen tensors
// bitwise too; a pattern that names no tensor, or one that freezes everything, is refused
// (exit 2) before anything starts.
//
// Tolerance, as the data-parallel equivalence tests (parallel/dp_run_helpers.h): losses within
// 1e-5 relative at every step, weights within 1e-5 of the largest weight. The frozen tensors are
// compared bitwise in every layout: nothing may touch them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "brigade/runtime/config.h"
#include "brigade/train/model_factory.h"
#include "common/checkpoint_tensors.h"
#include "common/fine_tune_suite.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/same_training.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::CkptPart;
using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::read_checkpoint;
using testing::run_command;
using testing::WholeTensor;

// wte and every tensor of block 0: 8,192 + 12,704 of the tiny GPT's 34,688 parameters.
constexpr const char* kFreeze = "--set 'train.freeze=[\"wte\", \"h.0.*\"]'";
bool frozen_name(const std::string& name) {
  return name == "wte.weight" || name.rfind("h.0.", 0) == 0;
}

struct FreezeMethod {
  static constexpr const char* kName = "freeze";
  static constexpr const char* kArgs = kFreeze;
};

class Freeze : public testing::FineTuneSuite<FreezeMethod> {
 protected:
  // Frozen tensors bitwise the source's, every other one changed, and no optimizer state for
  // the frozen ones (their part of adamw.m and adamw.v is zero; the others' is not).
  static void expect_frozen_kept(const std::string& name) {
    SCOPED_TRACE(name);
    const auto now = read_checkpoint(final_ckpt(name), CkptPart::kModel);
    ASSERT_EQ(now.size(), source_.size());
    int frozen = 0;
    for (const auto& [tensor, was] : source_) {
      ASSERT_TRUE(now.count(tensor)) << tensor;
      const WholeTensor& t = now.at(tensor);
      ASSERT_EQ(t.shape, was.shape) << tensor;
      if (frozen_name(tensor)) {
        ++frozen;
        EXPECT_TRUE(t.data == was.data) << tensor << " changed though frozen";
      } else {
        EXPECT_FALSE(t.data == was.data) << tensor << " did not train";
      }
    }
    EXPECT_EQ(frozen, 13);  // wte and block 0's 12 tensors
    const auto state = read_checkpoint(final_ckpt(name), CkptPart::kState);
    for (const char* buffer : {"adamw.m", "adamw.v"}) {
      const auto tensors = testing::state_buffer(state, buffer);
      ASSERT_EQ(tensors.size(), source_.size()) << buffer;
      for (const auto& [tensor, t] : tensors) {
        const bool all_zero =
            std::all_of(t.data.begin(), t.data.end(), [](float x) { return x == 0.0f; });
        EXPECT_EQ(all_zero, frozen_name(tensor)) << buffer << "/" << tensor;
      }
    }
  }
};

TEST_F(Freeze, FrozenTensorsKeepTheirStartingWeightsBitwise) {
  const std::string out = fine_tune("one", "");
  EXPECT_THAT(out, HasSubstr("train.freeze: 20,896 of 34,688 parameters frozen (13 tensors); "
                             "13,792 trainable"));
  expect_frozen_kept("one");
  // The reported gradient norm counts the trainable tensors only: below the same step's norm
  // with nothing frozen (the frozen gradients are far from zero).
  train("unfrozen", "--set train.init_from=" + dir_ + "/source --set train.steps=4");
  const auto frozen = testing::metrics_records(dir_ + "/one/metrics.jsonl", "train");
  const auto plain = testing::metrics_records(dir_ + "/unfrozen/metrics.jsonl", "train");
  ASSERT_EQ(frozen.size(), 4u);
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_EQ(frozen[0].at("loss"), plain[0].at("loss"));  // the same weights, the same batch
  EXPECT_LT(frozen[0].at("grad_norm").get<double>(), plain[0].at("grad_norm").get<double>());

  // From the initialisation (no init_from): the frozen tensor is the model's initial value.
  train("scratch", "--set train.steps=2 --set 'train.freeze=[\"wte\"]'");
  Config config = parse_config(testing::tiny_gpt_config(), "tiny");
  auto model = make_model(config.model, 1);
  model->initialize(static_cast<uint64_t>(config.run.seed));
  const ParamSpec& wte = model->layout().at("wte.weight");
  const std::vector<float> init(model->params() + wte.offset,
                                model->params() + wte.offset + wte.numel);
  const auto scratch =
      read_checkpoint(dir_ + "/scratch/checkpoints/step_00000002", CkptPart::kModel);
  EXPECT_TRUE(scratch.at("wte.weight").data == init);
  EXPECT_FALSE(scratch.at("wpe.weight").data ==
               std::vector<float>(model->params() + model->layout().at("wpe.weight").offset,
                                  model->params() + model->layout().at("wpe.weight").offset +
                                      model->layout().at("wpe.weight").numel));
}

TEST_F(Freeze, TwoProcessesEqualOneAndDoNotSendFrozenGradients) {
  fine_tune("one-dp", "");
  fine_tune("dp2", "--set train.micro_batch=4", 2);
  expect_frozen_kept("dp2");
  expect_same_training("one-dp", "dp2");
  // DDP's buckets hold the trainable ranges only: a step's all-reduce carries the 13,792
  // trainable gradients (4 bytes each) and the step's scalars, not the 34,688 of the model.
  const auto summary = testing::metrics_records(dir_ + "/dp2/metrics.jsonl", "summary");
  ASSERT_EQ(summary.size(), 1u);
  const int64_t sent = summary[0].at("comm_sent_by").at("dp/all_reduce").get<int64_t>();
  EXPECT_GT(sent, 4 * 13'792 * 4);
  EXPECT_LT(sent, 4 * (13'792 * 4 + 256));
}

TEST_F(Freeze, ZeroStagesKeepFrozenTensorsBitwise) {
  fine_tune("one-zero", "");
  for (int stage : {1, 2, 3}) {
    const std::string name = "zero" + std::to_string(stage);
    fine_tune(name, "--set train.micro_batch=4 --set parallel.zero=" + std::to_string(stage), 2);
    expect_frozen_kept(name);
    expect_same_training("one-zero", name);
  }
}

TEST_F(Freeze, TensorAndPipelineParallelismKeepFrozenTensorsBitwise) {
  fine_tune("one-mp", "");
  fine_tune("tp2", "--set parallel.tp=2", 2);
  expect_frozen_kept("tp2");
  expect_same_training("one-mp", "tp2");
  // Two stages: the last holds the tied copy of wte, frozen with it.
  fine_tune("pp2", "--set parallel.pp=2 --set train.micro_batch=4 --set train.grad_accum=2", 2);
  expect_frozen_kept("pp2");
  expect_same_training("one-mp", "pp2");
}

TEST_F(Freeze, APatternThatNamesNothingIsRefusedBeforeAnythingStarts) {
  const std::string base = "train " + config_ + " --set run.out_dir=" + dir_ + " --set run.name=";
  for (int nproc : {1, 2}) {
    const auto r = brigade(base + "typo --set 'train.freeze=[\"wte\", \"h.9.*\"]'", nproc);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("train.freeze: pattern \"h.9.*\" matches no parameter"));
    EXPECT_THAT(r.output, HasSubstr("wte.weight, wpe.weight, h.0.ln_1.weight"));
  }
  const auto all = brigade(base + "all --set 'train.freeze=[\"*\"]'");
  EXPECT_EQ(all.exit_code, 2) << all.output;
  EXPECT_THAT(all.output, HasSubstr("freeze every parameter"));
  const auto diloco = brigade(base + "diloco --set sync.method=diloco " + kFreeze, 2);
  EXPECT_EQ(diloco.exit_code, 2) << diloco.output;
  EXPECT_THAT(diloco.output, HasSubstr("train.freeze"));
  // Nothing was started: no run folder.
  for (const char* run : {"typo", "all", "diloco"}) {
    EXPECT_FALSE(std::ifstream(dir_ + "/" + std::string(run) + "/metrics.jsonl").good()) << run;
  }
}

}  // namespace
}  // namespace brigade
