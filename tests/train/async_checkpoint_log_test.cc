// An asynchronous checkpoint (train.async_checkpoint) is logged when it commits, not when the
// next checkpoint starts (issue 37). Every step is slowed to 200 ms by the test hook
// BRIGADE_FAULT_SLOW_RANK / _SLOW_MS, far longer than the tiny model's save takes, so the save
// of step 2 has committed during step 3: its "checkpoint .../step_00000002" line must come
// before step 3's progress line. Logged at the next checkpoint (step 4), it would come after.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

TEST(AsyncCheckpointLog, ASaveIsLoggedWhenItCommits) {
  const std::string dir = testing::make_temp_dir("async-log");
  const std::string config = dir + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"train.steps", "6"},
                                                     {"train.ckpt_every", "2"},
                                                     {"train.log_every", "1"},
                                                     {"train.async_checkpoint", "true"}});
  const std::string cmd = "env BRIGADE_FAULT_SLOW_RANK=0 BRIGADE_FAULT_SLOW_MS=200 " +
                          std::string(BRIGADE_BINARY) + " train " + config +
                          " --set run.out_dir=" + dir;
  const auto r = testing::run_command(cmd, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t committed = r.output.find("checkpoints/step_00000002 (");
  const size_t step3 = r.output.find("step 3/6 ");
  ASSERT_NE(committed, std::string::npos) << r.output;
  ASSERT_NE(step3, std::string::npos) << r.output;
  EXPECT_LT(committed, step3) << r.output;
}

}  // namespace
}  // namespace brigade
