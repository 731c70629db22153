// `brigade launch` on a terminal shows rank 0's progress line live (issue: under the launcher
// it never showed, because the workers' stderr is a pipe). The launcher runs under script(1),
// which gives it a pseudo-terminal; the bytes that reach the terminal must hold rank 0's
// in-place redraws ("\r\033[K[rank 0] step k/8 ...") for several steps, while other lines keep
// their prefixes. Without a terminal nothing is drawn in place: the output has no '\r'.
// The relay draws only the newest of the redraws it reads at once, so on a loaded machine a
// few steps of a millisecond each fold into one (measured: 7 redraws of 8 steps under ctest -j2);
// rank 0 sleeps 30 ms per step here (the straggler test hook), and at least 4 distinct steps,
// the last among them, must be drawn.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

TEST(LiveProgress, RankZerosProgressIsDrawnInPlaceUnderTheLauncher) {
  const std::string dir = make_temp_dir("live-progress");
  const std::string config = dir + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"train.steps", "8"}});
  const std::string launch = "env BRIGADE_FAULT_SLOW_RANK=0 BRIGADE_FAULT_SLOW_MS=30 " +
                             std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config +
                             " --set run.out_dir=" + dir;
  const auto tty = run_command("script -qec '" + launch + " --set run.name=\\\"tty\\\"' /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  const std::string redraw = "\r\033[K[rank 0] step ";
  std::set<int> steps;
  for (size_t at = 0; (at = tty.output.find(redraw, at)) != std::string::npos; ++at) {
    steps.insert(std::atoi(tty.output.c_str() + at + redraw.size()));
  }
  EXPECT_GE(steps.size(), 4u) << tty.output;
  EXPECT_TRUE(steps.count(8)) << tty.output;
  EXPECT_NE(tty.output.find("[rank 0] done:"), std::string::npos) << tty.output;

  const auto pipe = run_command(launch + " --set run.name=\\\"pipe\\\"");
  ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
  EXPECT_EQ(pipe.output.find('\r'), std::string::npos) << pipe.output;
  EXPECT_NE(pipe.output.find("[rank 0] step 8/8"), std::string::npos) << pipe.output;
}

}  // namespace
}  // namespace brigade
