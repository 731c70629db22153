// brigade generate end to end on a trained tiny GPT. References: the full-window forward per
// token (--no-kv-cache, the path the cache replaces) for greedy tokens, also past the context
// window; one prompt at a time for a batch; one process for tensor parallelism over two, for
// pipeline stages over two (parallel.pp = 2) and for pp = 2 x tp = 2 over four: the same JSON
// lines (text, token count, finish), greedy and sampled; greedy for top-k = 1; the unstopped
// completion for a stop string.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

class GenerateCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("generate-command");
    const std::string config = dir_ + "/gpt.toml";
    // vocab 300 > the byte tokenizer's 256: ids 256.. are never decodable, never sampled.
    std::ofstream(config) << testing::tiny_gpt_config(
        {{"train.steps", "40"}, {"model.vocab", "300"}, {"model.n_head", "4"}});
    const auto r = run_command(std::string(BRIGADE_BINARY) + " train " + config +
                                   " --set run.out_dir=" + dir_ + " --set run.name=gpt",
                               180);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(dir_ + "/prompts.txt")
        << "The meaning of\nA\nWhy do birds\n\nQ: what is\nShe said \"no\n"
        << "Once upon a time there was a\nx\n%\n";
  }
  // Completions of the prompts file (JSON lines on stdout, in order).
  std::vector<nlohmann::json> completions(const std::string& args, int nproc = 1,
                                          const std::string& run = "gpt") {
    const std::string bin = BRIGADE_BINARY;
    const std::string cmd =
        (nproc == 1 ? bin : bin + " launch --nproc " + std::to_string(nproc) + " --") +
        " generate --ckpt " + dir_ + "/" + run + " --prompts " + dir_ + "/prompts.txt " + args +
        " 2>/dev/null";
    const auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    std::vector<nlohmann::json> out;
    std::istringstream in(r.output);
    // (The output holds stderr's lines too.) A completion is a JSON line as it is, under launch
    // too: rank 0's stdout is not prefixed.
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"completion\"") == std::string::npos) continue;
      EXPECT_EQ(line.front(), '{') << "not a JSON line: " << line;
      out.push_back(nlohmann::json::parse(line.substr(line.find('{'))));
    }
    EXPECT_EQ(out.size(), 8u) << r.output;
    return out;
  }
  static std::vector<std::string> texts(const std::vector<nlohmann::json>& c) {
    std::vector<std::string> t;
    for (const auto& j : c) t.push_back(j.at("completion"));
    return t;
  }
  static std::string dir_;
};
std::string GenerateCommand::dir_;

TEST_F(GenerateCommand, KvCacheGreedyEqualsTheFullWindowEvenPastTheContext) {
  // 50 new tokens run past seq_len = 32: both shift the window alike.
  const auto cached = completions("--temperature 0 --tokens 50");
  EXPECT_EQ(texts(cached), texts(completions("--temperature 0 --tokens 50 --no-kv-cache")));
  for (const auto& c : cached) {
    EXPECT_EQ(c.at("tokens"), 50);
    EXPECT_EQ(c.at("finish"), "length");
  }
  EXPECT_EQ(texts(cached), texts(completions("--top-k 1 --temperature 1.5 --tokens 50")));
}

TEST_F(GenerateCommand, ABatchEqualsOnePromptAtATime) {
  const std::string sampled = "--temperature 1.0 --top-k 0 --top-p 0.9 --tokens 24";
  const auto batched = completions(sampled + " --seed 7 --batch 3");  // 8 prompts, 3 slots
  EXPECT_EQ(texts(batched), texts(completions(sampled + " --seed 7 --batch 1")));
  EXPECT_NE(texts(batched), texts(completions(sampled + " --seed 8 --batch 3")));
}

TEST_F(GenerateCommand, TensorParallelOverTwoProcessesEqualsOne) {
  const std::string sampled = "--temperature 0.9 --top-k 20 --seed 3 --tokens 24";
  EXPECT_EQ(texts(completions(sampled, 2)), texts(completions(sampled)));
}

// The whole JSON lines: completion, tokens and finish must all agree.
std::vector<std::string> lines(const std::vector<nlohmann::json>& c) {
  std::vector<std::string> out;
  for (const auto& j : c) out.push_back(j.dump());
  return out;
}

TEST_F(GenerateCommand, PipelineStagesOverTwoProcessesEqualOne) {
  // 8 prompts of 1 to 29 bytes, 3 or 8 slots: prefills of different lengths share steps with
  // decodes; 50 greedy tokens run past seq_len = 32 (re-prefilled windows).
  const std::string pp2 = " --set parallel.pp=2";
  const std::string greedy = "--temperature 0 --tokens 50";
  EXPECT_EQ(lines(completions(greedy + pp2, 2)), lines(completions(greedy)));
  const std::string sampled = "--temperature 0.9 --top-k 20 --top-p 0.95 --seed 3 --tokens 40";
  const auto one = completions(sampled + " --batch 3");
  EXPECT_EQ(lines(completions(sampled + " --batch 3" + pp2, 2)), lines(one));
  EXPECT_EQ(lines(completions(sampled + " --batch 8 --set parallel.layer_split=[1,1]" + pp2, 2)),
            lines(one));
  // A stop string: the same completions end at it, on every stage alike.
  const std::string first = one[0].at("completion");
  ASSERT_GE(first.size(), 12u);
  const std::string stop = " --stop '" + first.substr(6, 2) + "'";
  const auto stopped = completions(sampled + stop);
  EXPECT_EQ(stopped[0].at("finish"), "stop");
  EXPECT_EQ(lines(completions(sampled + stop + pp2, 2)), lines(stopped));
}

TEST_F(GenerateCommand, PipelineTimesTensorParallelOverFourProcessesEqualsOne) {
  const std::string sampled = "--temperature 0.9 --top-k 20 --seed 4 --tokens 24 --batch 3";
  EXPECT_EQ(lines(completions(sampled + " --set parallel.pp=2 --set parallel.tp=2", 4)),
            lines(completions(sampled)));
}

TEST_F(GenerateCommand, RefusesAPipelineLayoutThatDoesNotFit) {
  const std::string bin = BRIGADE_BINARY;
  const std::string gen = " generate --ckpt " + dir_ + "/gpt --prompt x --tokens 2";
  // Alone: exit 2 before anything is loaded, naming the key, the value and what is allowed.
  auto r = run_command(bin + gen + " --set parallel.pp=3");  // 2 blocks
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("parallel.pp = 3: pipeline stages must be 1 to model.n_layer = 2"),
            std::string::npos)
      << r.output;
  r = run_command(bin + gen + " --set parallel.pp=2");  // one process
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("allowed parallel.pp here: 1"), std::string::npos) << r.output;
  r = run_command(bin + gen + " --set model.n_layer=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("parallel.pp, parallel.tp, parallel.layer_split"), std::string::npos)
      << r.output;
  // Under the launcher: refused (exit 2) before any worker starts.
  const std::string launch2 = bin + " launch --nproc 2 --";
  r = run_command(launch2 + gen + " --set parallel.pp=2 --set parallel.layer_split=[2,0]");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("parallel.layer_split = [2, 0]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 0]"), std::string::npos) << r.output;
  r = run_command(launch2 + gen + " --set parallel.pp=2 --no-kv-cache");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--no-kv-cache"), std::string::npos) << r.output;
  r = run_command(launch2 + " generate --ckpt " + dir_ + "/missing --prompt x");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(r.output.find("[rank 0]"), std::string::npos) << r.output;
}

TEST_F(GenerateCommand, AStopStringEndsTheCompletionBeforeIt) {
  const auto full = completions("--temperature 0 --tokens 40");
  // A stop string taken from the middle of the first completion.
  const std::string first = full[0].at("completion");
  ASSERT_GE(first.size(), 12u);
  const std::string stop = first.substr(8, 3);
  const auto stopped = completions("--temperature 0 --tokens 40 --stop '" + stop + "'");
  for (size_t i = 0; i < full.size(); ++i) {
    const std::string text = full[i].at("completion");
    const size_t at = text.find(stop);
    if (at == std::string::npos) {
      EXPECT_EQ(stopped[i].at("completion"), text) << i;
      EXPECT_EQ(stopped[i].at("finish"), "length") << i;
    } else {
      EXPECT_EQ(stopped[i].at("completion"), text.substr(0, at)) << i;
      EXPECT_EQ(stopped[i].at("finish"), "stop") << i;
    }
  }
}

TEST_F(GenerateCommand, ALoraCheckpointGeneratesAsItsMergedExport) {
  const std::string bin = BRIGADE_BINARY;
  const std::string config = dir_ + "/lora.toml";
  std::ofstream(config) << testing::tiny_gpt_config(
      {{"train.steps", "20"},
       {"train.lr", "1e-1"},
       {"model.vocab", "300"},
       {"model.n_head", "4"},
       {"lora.rank", "4"},
       {"lora.targets", "[\"attn.c_attn\", \"mlp.c_fc\"]"}});
  auto r = run_command(bin + " train " + config + " --set run.out_dir=" + dir_ +
                           " --set run.name=lora --set train.init_from=" + dir_ + "/gpt",
                       120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The reference: merged by export into plain GPT-2 files, imported as a plain run.
  r = run_command(bin + " export --ckpt " + dir_ + "/lora --out " + dir_ + "/lora-hf", 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(dir_ + "/plain.toml")
      << testing::tiny_gpt_config({{"model.vocab", "300"}, {"model.n_head", "4"}});
  r = run_command(bin + " import --from " + dir_ + "/lora-hf --config " + dir_ +
                      "/plain.toml --set run.out_dir=" + dir_ + " --set run.name=merged",
                  60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Sampled (greedy text of so small a model hides small changes of the logits).
  const std::string sampled = "--temperature 1 --top-k 0 --seed 5 --tokens 30";
  const auto adapted = texts(completions(sampled, 1, "lora"));
  EXPECT_EQ(adapted, texts(completions(sampled, 1, "merged")));
  EXPECT_NE(adapted, texts(completions(sampled, 1, "gpt")));   // the adapters changed the model
  EXPECT_EQ(adapted, texts(completions(sampled, 2, "lora")));  // merged, then split over tp = 2
  EXPECT_EQ(adapted, texts(completions(sampled + " --set parallel.pp=2", 2, "lora")));  // pp = 2
}

TEST_F(GenerateCommand, RefusesWhatItCannotDo) {
  const std::string bin = BRIGADE_BINARY;
  const auto empty =
      run_command("printf '\\n\\n' > " + dir_ + "/none.txt && " + bin + " generate --ckpt " + dir_ +
                  "/gpt --prompts " + dir_ + "/none.txt");
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  const auto tp3 = run_command(bin + " launch --nproc 3 -- generate --ckpt " + dir_ +
                               "/gpt --prompt x --tokens 2");
  EXPECT_NE(tp3.exit_code, 0) << tp3.output;  // 4 heads do not split 3 ways
  EXPECT_NE(tp3.output.find("n_head"), std::string::npos) << tp3.output;
}

}  // namespace
}  // namespace brigade
