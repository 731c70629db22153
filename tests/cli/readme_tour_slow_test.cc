// The README's tour runs command by command as written (scripts/readme_tour.sh: every command
// between its tour markers, in one shell, in a scratch folder next to this build), so a README
// command that stops working fails the suite.
#include <gtest/gtest.h>

#include <string>

#include "common/run_command.h"

namespace brigade {
namespace {

TEST(ReadmeTour, EveryCommandRunsAsWritten) {
  const std::string scratch = testing::make_temp_dir("readme-tour");
  const auto r = testing::run_command(
      std::string(BRIGADE_SOURCE_DIR) + "/scripts/readme_tour.sh " + scratch + "/tour", 580);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(r.output.size() > 20000 ? r.output.size() - 20000
                                                                       : 0);
  EXPECT_NE(r.output.find("readme_tour: every command of the tour ran"), std::string::npos);
}

}  // namespace
}  // namespace brigade
