// Instruction tuning and JSONL/text inputs end to end through the brigade binary: a JSONL file of
// prompt/response records trains (the loss masked on prompts), and two ranks, one rank with
// gradient accumulation, or two replicas of a two-stage pipeline (the model-parallel engine)
// train exactly as one process on the same global batch: every step's
// loss and gradient norm agree within 1e-5 relative (float rounding of the micro-batch weights
// and of the gradient average; without the weights the losses differ by ~1e-2, see
// micro_batch_weights_test). Text over a folder and JSONL documents train too; bad [data] keys
// exit 2 and a broken JSONL line exits 3 naming file:line, before any step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/data/text_corpus.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

class InstructionTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("instruction");
    ASSERT_FALSE(dir_.empty());
    data_ = dir_ + "/qa.jsonl";
    std::ofstream out(data_);
    // Sums of two numbers: responses of 1 to 4 digits, prompts of different lengths, so
    // micro-batches hold different numbers of response targets.
    for (int i = 0; i < 300; ++i) {
      const int a = (i * 37) % 1000, b = (i * 11) % (i % 3 == 0 ? 10 : 1000);
      out << nlohmann::json{{"prompt",
                             "Q: " + std::to_string(a) + " plus " + std::to_string(b) + "?\nA: "},
                            {"response", std::to_string(a + b)},
                            {"source", "synthetic"}}
                 .dump()
          << "\n";
    }
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config({{"data.source", "\"jsonl\""},
                                                        {"data.path", "\"" + data_ + "\""},
                                                        {"data.prompt_field", "\"prompt\""},
                                                        {"data.response_field", "\"response\""},
                                                        {"train.steps", "8"},
                                                        {"train.eval_batches", "4"}});
  }

  // (loss, grad_norm) per step of `launch` (a prefix such as "launch --nproc 2 --") + train.
  std::vector<std::pair<double, double>> run(const std::string& name, const std::string& launch,
                                             const std::string& extra) {
    const std::string cmd = std::string(BRIGADE_BINARY) + " " + launch + " train " + config_ +
                            " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
    const auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("jsonl instruction records"), std::string::npos) << r.output;
    std::vector<std::pair<double, double>> out;
    for (const auto& j :
         testing::metrics_records(dir_ + "/" + name + "/tiny/metrics.jsonl", "train")) {
      out.emplace_back(j["loss"].get<double>(), j["grad_norm"].get<double>());
    }
    EXPECT_EQ(out.size(), 8u) << name;
    return out;
  }

  std::string dir_, data_, config_;
};

TEST_F(InstructionTrain, TwoRanksAndAccumulationEqualOneProcess) {
  const auto one = run("one", "", "--set train.micro_batch=4");
  const auto dp2 = run("dp2", "launch --nproc 2 --", "--set train.micro_batch=2");
  const auto accum = run("accum", "", "--set train.micro_batch=1 --set train.grad_accum=4");
  // The model-parallel engine: two pipeline stages in each of two replicas.
  const auto pp2dp2 = run("pp2dp2", "launch --nproc 4 --",
                          "--set parallel.pp=2 --set parallel.dp=2 --set train.micro_batch=1 "
                          "--set train.grad_accum=2");
  ASSERT_EQ(one.size(), 8u);
  for (const auto* other : {&dp2, &accum, &pp2dp2}) {
    ASSERT_EQ(other->size(), one.size());
    for (size_t s = 0; s < one.size(); ++s) {
      SCOPED_TRACE(s);
      EXPECT_NEAR((*other)[s].first, one[s].first, 1e-5 * std::abs(one[s].first));
      EXPECT_NEAR((*other)[s].second, one[s].second, 1e-5 * std::abs(one[s].second));
    }
  }
  EXPECT_LT(one.back().first, one.front().first);  // it learns something in 8 steps
  const auto evals = testing::metrics_records(dir_ + "/one/tiny/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_TRUE(std::isfinite(evals.back()["val_loss"].get<double>()));
}

// A folder of text files and a JSONL file of documents (data.text_field) train, reading what
// the loaders read: the log's document counts are load_text_files' counts.
TEST_F(InstructionTrain, TextFolderAndJsonlDocumentsTrain) {
  const std::string corpus = dir_ + "/corpus";
  std::filesystem::create_directories(corpus + "/part");
  std::ofstream docs(dir_ + "/docs.jsonl");
  for (int f = 0; f < 3; ++f) {
    std::ofstream out(corpus + (f == 2 ? "/part/c.txt" : f == 1 ? "/b.txt" : "/a.txt"));
    for (int d = 0; d < 60; ++d) {
      const std::string text =
          "file " + std::to_string(f) + " paragraph " + std::to_string(d) + " has some words in it";
      out << text << "\n\n";
      docs << nlohmann::json{{"body", text}}.dump() << "\n";
    }
  }
  docs.close();
  const TextSplits want = load_text_files(corpus, 0.05);
  const std::string base = std::string(BRIGADE_BINARY) + " train " + config_ +
                           " --set train.steps=2 --set data.prompt_field='\"\"' "
                           "--set data.response_field='\"\"' --set run.out_dir=" +
                           dir_;
  const auto text =
      run_command(base + "/text --set data.source='\"text\"' --set data.path='\"" + corpus + "\"'");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("text documents: " + std::to_string(want.train_docs) + " train"),
            std::string::npos)
      << text.output;
  const auto jsonl = run_command(base + "/jsonl --set data.path='\"" + dir_ +
                                 "/docs.jsonl\"' --set data.text_field='\"body\"'");
  EXPECT_EQ(jsonl.exit_code, 0) << jsonl.output;
  EXPECT_NE(jsonl.output.find("jsonl documents: "), std::string::npos) << jsonl.output;
}

TEST_F(InstructionTrain, BadDataKeysExit2AndBrokenLinesExit3) {
  const std::string base =
      std::string(BRIGADE_BINARY) + " train " + config_ + " --set run.out_dir=" + dir_ + "/bad ";
  struct Case {
    std::string overrides, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"--set data.source='\"csv\"'", "data.source = \"csv\""},
           {"--set data.source='\"text\"'", "data.prompt_field = \"prompt\""},
           {"--set data.response_field='\"\"'", "data.response_field = \"\""},
           {"--set data.text_field='\"body\"'", "data.text_field = \"body\""},
           {"--set data.response_field='\"prompt\"'", "must differ"},
           {"--set model.n_experts=2 --set parallel.ep=2", "parallel.ep = 2"},
           {"--set data.path='\"\"'", "data.path = \"\": data.source = \"jsonl\" needs a file"},
           {"--set data.prompt_field='\"\"' --set data.response_field='\"\"' "
            "--set data.text_field='\"\"'",
            "data.text_field = \"\""},
           {"--set data.source='\"fortunes\"' --set data.prompt_field='\"\"' "
            "--set data.response_field='\"\"' --set data.text_field='\"body\"'",
            "needs data.source = \"jsonl\", not \"fortunes\""},
       }) {
    SCOPED_TRACE(c.overrides);
    const auto r = run_command(base + c.overrides);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << r.output;
  }
  {
    std::ofstream bad(data_, std::ios::app);
    bad << "{\"prompt\": \"Q\", \"response\": 7}\n";
  }
  const auto r = run_command(base);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find(data_ + ":301: field \"response\" is number"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brigade
