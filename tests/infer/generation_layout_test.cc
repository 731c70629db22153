// generate's layout over its job (infer/generation_layout.h): tp = processes / pp by default,
// stages balanced by parameter count as training balances them, or an explicit layer_split; and
// every refusal names the key, its value and what is allowed.
#include "brigade/infer/generation_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "brigade/base/error.h"

namespace brigade {
namespace {

const GptConfig kCfg{.vocab = 300, .seq_len = 32, .d_model = 32, .n_layer = 4, .n_head = 4};

// The ConfigError's message, or "" when none is thrown.
std::string refusal(const std::vector<std::string>& overrides, int world,
                    const GptConfig& cfg = kCfg) {
  try {
    resolve_generation_layout(cfg, overrides, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(GenerationLayout, TensorParallelOverTheProcessesUnlessSplitIntoStages) {
  GenerationLayout g = resolve_generation_layout(kCfg, {}, 2);
  EXPECT_EQ(g.pp, 1);
  EXPECT_EQ(g.tp, 2);
  EXPECT_EQ(g.stage_bounds, (std::vector<int>{0, 4}));
  g = resolve_generation_layout(kCfg, {"parallel.pp=2"}, 2);
  EXPECT_EQ(g.tp, 1);
  // The embeddings and the head weigh as much as blocks here: the balanced cut is [2, 2].
  EXPECT_EQ(g.stage_bounds, (std::vector<int>{0, 2, 4}));
  g = resolve_generation_layout(kCfg, {"parallel.pp=2", "parallel.tp=2"}, 4);
  EXPECT_EQ(g.tp, 2);
  g = resolve_generation_layout(kCfg, {"parallel.pp=2", "parallel.layer_split=[1, 3]"}, 2);
  EXPECT_EQ(g.stage_bounds, (std::vector<int>{0, 1, 4}));
  g = resolve_generation_layout(kCfg, {"parallel.pp=4"}, 4);
  EXPECT_EQ(g.stage_bounds, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(GenerationLayout, RefusalsNameTheKeyTheValueAndWhatIsAllowed) {
  std::string e = refusal({"parallel.pp=5"}, 5);
  EXPECT_NE(e.find("parallel.pp = 5"), std::string::npos) << e;
  EXPECT_NE(e.find("1 to model.n_layer = 4"), std::string::npos) << e;
  e = refusal({"parallel.pp=0"}, 1);
  EXPECT_NE(e.find("parallel.pp = 0"), std::string::npos) << e;
  e = refusal({"parallel.pp=3"}, 4);
  EXPECT_NE(e.find("parallel.pp = 3 does not divide the job's 4"), std::string::npos) << e;
  EXPECT_NE(e.find("allowed parallel.pp here: 1, 2, 4"), std::string::npos) << e;
  e = refusal({"parallel.pp=2", "parallel.tp=1"}, 4);
  EXPECT_NE(e.find("parallel.tp = 1 with parallel.pp = 2"), std::string::npos) << e;
  EXPECT_NE(e.find("allowed parallel.tp here: 2"), std::string::npos) << e;
  e = refusal({"parallel.pp=1"}, 3);  // tp = 3 does not split 4 heads
  EXPECT_NE(e.find("parallel.tp = 3"), std::string::npos) << e;
  EXPECT_NE(e.find("n_head"), std::string::npos) << e;
  e = refusal({"parallel.pp=2", "parallel.layer_split=[4, 0]"}, 2);
  EXPECT_NE(e.find("parallel.layer_split = [4, 0]"), std::string::npos) << e;
  e = refusal({"parallel.pp=2", "parallel.layer_split=[1, 1]"}, 2);
  EXPECT_NE(e.find("sums to 2"), std::string::npos) << e;
  e = refusal({"model.n_layer=2"}, 1);
  EXPECT_NE(e.find("--set model.n_layer=2"), std::string::npos) << e;
  EXPECT_NE(e.find("parallel.pp, parallel.tp, parallel.layer_split"), std::string::npos) << e;
  e = refusal({"parallel.pp=x"}, 1);
  EXPECT_NE(e.find("parallel.pp"), std::string::npos) << e;
  GptConfig moe = kCfg;
  moe.n_experts = 4;
  e = refusal({"parallel.pp=2"}, 2, moe);
  EXPECT_NE(e.find("model.n_experts = 4"), std::string::npos) << e;
  EXPECT_EQ(refusal({"parallel.pp=2"}, 2), "");
}

}  // namespace
}  // namespace brigade
