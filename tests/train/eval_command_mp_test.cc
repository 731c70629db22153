// brigade eval (issue 18): a checkpoint's figures on its validation data, on any number of ranks
// and in any layout. References: the training run's own final validation pass (computed in the
// training process from the weights in memory, not from the checkpoint), the definitions
// perplexity = e^loss and bits per byte = loss / ln 2 for byte tokens, and one process for every
// other rank count and layout.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

class EvalCommand : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("eval-command"); }
  static testing::CommandResult brigade(const std::string& args, int nproc = 1) {
    return testing::run_brigade(args, nproc, 180);
  }
  void train(const std::string& config_text, const std::string& name) {
    const std::string config = dir_ + "/" + name + ".toml";
    std::ofstream(config) << config_text;
    const auto r =
        brigade("train " + config + " --set run.out_dir=" + dir_ + " --set run.name=" + name);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // Runs eval with `args` on nproc ranks and returns its JSON figures.
  nlohmann::json eval(const std::string& args, int nproc = 1) {
    const std::string out = dir_ + "/eval-" + std::to_string(counter_++) + ".json";
    const auto r = brigade("eval " + args + " --json " + out, nproc);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(out);
    EXPECT_TRUE(in.good()) << r.output;
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
  }
  nlohmann::json final_eval(const std::string& name) {
    const auto recs = testing::metrics_records(dir_ + "/" + name + "/metrics.jsonl", "eval");
    EXPECT_FALSE(recs.empty());
    return recs.empty() ? nlohmann::json::object() : recs.back();
  }
  std::string dir_;
  int counter_ = 0;
};

TEST_F(EvalCommand, GptFiguresEqualTrainingsOwnPassOnAnyRanksAndLayout) {
  train(testing::tiny_gpt_config({{"train.steps", "6"}, {"train.eval_batches", "6"}}), "gpt");
  const std::string ckpt = "--ckpt " + dir_ + "/gpt --batches 6";
  const nlohmann::json one = eval(ckpt);
  const double loss = one.at("loss");
  EXPECT_EQ(one.at("step"), 6);
  EXPECT_DOUBLE_EQ(one.at("examples").get<double>(), 24.0);  // 6 micro-batches of 4
  EXPECT_DOUBLE_EQ(one.at("tokens").get<double>(), 24.0 * 32);
  // The training process's own final pass over the same 6 micro-batches, to its f32 record.
  EXPECT_NEAR(loss, final_eval("gpt").at("val_loss").get<double>(), 1e-6 * loss);
  EXPECT_NEAR(one.at("perplexity").get<double>(), std::exp(loss), 1e-12 * std::exp(loss));
  EXPECT_NEAR(one.at("bits_per_byte").get<double>(), loss / std::log(2.0), 1e-12);

  // Data parallel over 2 and 4 ranks: the same micro-batches, summed in double.
  for (int n : {2, 4}) {
    const nlohmann::json dp = eval(ckpt, n);
    EXPECT_EQ(dp.at("ranks"), n);
    EXPECT_DOUBLE_EQ(dp.at("examples").get<double>(), 24.0) << n;
    EXPECT_NEAR(dp.at("loss").get<double>(), loss, 1e-12 * loss) << n;
  }
  // Other layouts read the same weights into their shards: equal to f32 summation order.
  for (const char* layout : {"--set parallel.tp=2", "--set parallel.pp=2", "--set parallel.zero=3",
                             "--set parallel.tp=2 --set parallel.dp=2"}) {
    const int n = std::string(layout).find("dp=2") != std::string::npos ? 4 : 2;
    const nlohmann::json other = eval(ckpt + " " + layout, n);
    EXPECT_NEAR(other.at("loss").get<double>(), loss, 1e-5 * loss) << layout;
  }
  // Without --batches: the whole validation split, more than the 6 micro-batches.
  EXPECT_GT(eval("--ckpt " + dir_ + "/gpt").at("examples").get<double>(), 24.0);
}

TEST_F(EvalCommand, AllOfAHeldOutFileWithTheCheckpointsTokenizer) {
  train(testing::tiny_gpt_config(
            {{"train.steps", "4"}, {"data.tokenizer", "\"bpe\""}, {"model.vocab", "300"}}),
        "bpe");
  // A held-out file of 50 paragraphs: --all evaluates every one of them, the split only some.
  const std::string held_out = dir_ + "/held-out.txt";
  {
    std::ofstream f(held_out);
    for (int i = 0; i < 50; ++i) {
      f << "Paragraph " << i << " of a held-out text that the model never saw in training.\n\n";
    }
  }
  const std::string base = "--ckpt " + dir_ + "/bpe --data " + held_out + " --set data.source=text";
  const nlohmann::json all = eval(base + " --all");
  const nlohmann::json all2 = eval(base + " --all", 2);
  EXPECT_NEAR(all2.at("loss").get<double>(), all.at("loss").get<double>(), 1e-12);
  EXPECT_EQ(all2.at("examples"), all.at("examples"));
  // Without --all: only the validation split's paragraphs (5% of them).
  const nlohmann::json split = eval(base);
  EXPECT_LT(split.at("examples").get<double>(), all.at("examples").get<double>() / 4);
  // bits per byte use the BPE's bytes per token on this text: lower than per-token bits.
  EXPECT_LT(all.at("bits_per_byte").get<double>(), all.at("loss").get<double>() / std::log(2.0));
}

TEST_F(EvalCommand, ClassifierAccuracyEqualsTrainingsOnAnyRanks) {
  train(R"([run]
seed = 3
[model]
kind = "mlp"
hidden = [32]
[data]
source = "fashion_mnist"
[train]
micro_batch = 50
steps = 20
lr = 3e-3
warmup = 2
eval_every = 0
eval_batches = 8
ckpt_every = 0
log_every = 10
)",
        "mlp");
  const std::string ckpt = "--ckpt " + dir_ + "/mlp --batches 8";
  const nlohmann::json one = eval(ckpt), two = eval(ckpt, 2);
  const nlohmann::json trained = final_eval("mlp");
  EXPECT_DOUBLE_EQ(one.at("examples").get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(one.at("accuracy").get<double>(), trained.at("val_accuracy").get<double>());
  EXPECT_DOUBLE_EQ(two.at("accuracy").get<double>(), one.at("accuracy").get<double>());
  EXPECT_NEAR(two.at("loss").get<double>(), one.at("loss").get<double>(), 1e-12);
  EXPECT_GT(one.at("accuracy").get<double>(), 0.3);  // trained: far above chance (0.1)
}

TEST_F(EvalCommand, RefusesWhatItCannotEvaluate) {
  const auto missing = brigade("eval --ckpt " + dir_ + "/nothing-here");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  train(testing::tiny_gpt_config({{"train.steps", "2"}}), "small");
  const auto mesh = brigade("eval --ckpt " + dir_ + "/small --set parallel.tp=3", 2);
  EXPECT_EQ(mesh.exit_code, 2) << mesh.output;  // the launcher's own check: no worker started
  EXPECT_EQ(mesh.output.find("worker(s)"), std::string::npos) << mesh.output;
  EXPECT_NE(mesh.output.find("tp=3"), std::string::npos) << mesh.output;
  const auto images = brigade("eval --ckpt " + dir_ + "/small --all --set data.source=shards");
  EXPECT_EQ(images.exit_code, 2) << images.output;
}

}  // namespace
}  // namespace brigade
