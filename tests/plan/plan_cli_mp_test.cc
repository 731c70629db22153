// `brigade plan` as a user runs it: calibrate this machine, plan a config on it, and launch the
// plan it writes (the real binary and a real two-process job).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

TEST(PlanCli, CalibratesPlansAndWritesAConfigThatTrains) {
  const std::string dir = testing::make_temp_dir("plan-cli");
  const std::string config = std::string(BRIGADE_SOURCE_DIR) + "/configs/hybrid-3d.toml";
  const std::string cluster = dir + "/cluster.toml";
  const testing::CommandResult cal =
      testing::run_brigade("plan --calibrate " + config + " --nproc 2 --out " + cluster);
  ASSERT_EQ(cal.exit_code, 0) << cal.output;
  EXPECT_THAT(cal.output, HasSubstr("all-reduce among 2 processes over loopback"));
  const testing::CommandResult plan = testing::run_brigade(
      "plan " + config + " --cluster " + cluster + " --top 3 --write " + dir + "/plan.toml");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_THAT(plan.output, HasSubstr("layouts predicted for 2 processes"));
  EXPECT_THAT(plan.output, HasSubstr("brigade launch --nproc 2 -- train " + dir + "/plan.toml"));
  const testing::CommandResult json =
      testing::run_brigade("plan " + config + " --cluster " + cluster + " --top 2 --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["layouts"].size(), 2u);
  EXPECT_GT(j["layouts"][0]["tokens_per_s"].get<double>(), 0);
  // The plan it wrote is a job that runs on 2 processes.
  const testing::CommandResult run =
      testing::run_brigade("train " + dir +
                               "/plan.toml --set train.steps=3 --set train.warmup=0 --set "
                               "train.eval_every=0 --set train.ckpt_every=0 --set run.out_dir=" +
                               dir + "/runs",
                           2);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  // A cluster file with a bad key is refused with exit code 2, naming it.
  const testing::CommandResult bad =
      testing::run_command("sed 's/watts/wats/' " + cluster + " > " + dir + "/bad.toml && " +
                           BRIGADE_BINARY + " plan " + config + " --cluster " + dir + "/bad.toml");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("unknown key device.wats"));
}

}  // namespace
}  // namespace brigade
