// What a run folder keeps across invocations, and what a rerun says (issue 19): a finished run
// run again says it is complete and appends nothing; a resumed run names every key it changed
// against the checkpoint's config; each segment keeps its own config.toml and manifest.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "brigade/runtime/config_diff.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ConfigChangesTest, NamesEveryChangedKeyInSchemaOrder) {
  const Config saved = parse_config("[train]\nsteps = 4\nlr = 0.002\n", "saved");
  const Config now = parse_config("[train]\nsteps = 6\nlr = 0.002\n[run]\nname = \"x\"\n", "now");
  const auto changes = config_changes(saved.to_toml(), now);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].key, "run.name");
  EXPECT_EQ(changes[0].now, "\"x\"");
  EXPECT_EQ(changes[1].key, "train.steps");
  EXPECT_EQ(changes[1].was, "4");
  EXPECT_EQ(changes[1].now, "6");
  EXPECT_EQ(describe_changes(changes), "run.name \"default\" -> \"x\", train.steps 4 -> 6");
  EXPECT_TRUE(config_changes(now.to_toml(), now).empty());
}

TEST(ResumeRecordsTest, CompleteRunsSayIdleAndSegmentsKeepTheirRecords) {
  const std::string dir = make_temp_dir("resume-records");
  std::ofstream(dir + "/run.toml") << testing::tiny_gpt_config(
      {{"train.steps", "4"}, {"train.warmup", "1"}, {"train.ckpt_every", "4"}});
  const std::string train =
      std::string(BRIGADE_BINARY) + " train " + dir + "/run.toml --set run.out_dir=" + dir + " ";
  const std::string run = dir + "/tiny";
  ASSERT_EQ(run_command(train).exit_code, 0);
  const std::string metrics = read_text(run + "/metrics.jsonl");

  const auto again = run_command(train);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("is already complete: step 4 of train.steps = 4"), std::string::npos)
      << again.output;
  EXPECT_EQ(read_text(run + "/metrics.jsonl"), metrics) << "a complete run appended records";

  const auto longer = run_command(train + "--set train.steps=6 --set train.lr=0.001");
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_NE(longer.output.find("the config differs from the checkpoint's (accepted; in effect "
                               "from step 5): train.steps 4 -> 6, train.lr 0.003 -> 0.001"),
            std::string::npos)
      << longer.output;
  const std::string first = run + "/segments/from_step_00000000";
  const std::string second = run + "/segments/from_step_00000004";
  EXPECT_NE(read_text(first + "/config.toml").find("steps = 4\n"), std::string::npos);
  EXPECT_NE(read_text(second + "/config.toml").find("steps = 6\n"), std::string::npos);
  EXPECT_EQ(read_text(run + "/config.toml"), read_text(second + "/config.toml"));
  EXPECT_TRUE(nlohmann::json::parse(read_text(first + "/manifest.json")).contains("git_commit"));
  EXPECT_TRUE(nlohmann::json::parse(read_text(second + "/manifest.json")).contains("git_commit"));
}

}  // namespace
}  // namespace brigade
