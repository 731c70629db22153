// Activation recomputation (train.recompute = "block") end to end through `brigade launch`: a
// run that keeps only each block's input and re-runs its forward in backward trains bitwise like
// the run that kept everything, on both engines: data parallel with ZeRO-3 (parameter groups
// gathered again for the recomputed forwards), a 1F1B pipeline (each stage recomputing its
// blocks; the deferred weight gradients are off under recomputation, which for 1F1B is the same
// arithmetic) and tensor parallelism (the recomputed forwards repeat their tp all-reduces). The
// reference is the same layout without recomputation: every step's loss and gradient norm must
// be equal as printed, 8 steps of AdamW amplifying any difference in a gradient.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

class Recompute : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("recompute");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", "8"}, {"train.micro_batch", "2"}, {"train.grad_accum", "2"}});
  }
  // (loss, grad_norm) per step of a 2-rank run.
  std::vector<std::pair<double, double>> run(const std::string& name, const std::string& extra) {
    const std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config_ +
                            " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
    const auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    std::vector<std::pair<double, double>> out;
    for (const auto& j :
         testing::metrics_records(dir_ + "/" + name + "/tiny/metrics.jsonl", "train")) {
      out.emplace_back(j["loss"].get<double>(), j["grad_norm"].get<double>());
    }
    EXPECT_EQ(out.size(), 8u) << name;
    return out;
  }

  std::string dir_, config_;
};

TEST_F(Recompute, EveryEngineTrainsBitwiseLikeKeepingTheActivations) {
  for (const std::string layout :
       {"--set parallel.zero=3", "--set parallel.pp=2", "--set parallel.tp=2"}) {
    SCOPED_TRACE(layout);
    const std::string name = layout.substr(15, layout.find('=') - 15);
    const auto kept = run(name + "-none", layout);
    const auto again = run(name + "-block", layout + " --set train.recompute=block");
    EXPECT_EQ(again, kept);
  }
}

// Refused before any process starts: another model kind, and the zero-bubble schedule whose
// deferred weight gradients read the activations recomputation drops.
TEST_F(Recompute, UnsupportedCombinationsAreRefusedByName) {
  const auto zb = run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " +
                              config_ + " --set run.out_dir=" + dir_ +
                              "/zb --set parallel.pp=2 --set parallel.schedule=zb-h1 "
                              "--set train.recompute=block");
  EXPECT_EQ(zb.exit_code, 2) << zb.output;
  EXPECT_NE(zb.output.find("train.recompute = \"block\""), std::string::npos) << zb.output;
  EXPECT_NE(zb.output.find("zb-h1"), std::string::npos) << zb.output;
  const auto bad = run_command(std::string(BRIGADE_BINARY) + " train " + config_ +
                               " --set run.out_dir=" + dir_ + "/bad --set train.recompute=layer");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("\"block\""), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace brigade
