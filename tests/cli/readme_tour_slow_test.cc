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
  // The tour's federation learns something a newcomer can see: well above chance (10%) after
  // its three rounds (measured about 65-69%).
  const std::string done = "federation done: round 3 of 3, test accuracy ";
  const size_t at = r.output.find(done);
  ASSERT_NE(at, std::string::npos) << "the tour's federation did not finish its rounds";
  EXPECT_GT(std::stod(r.output.substr(at + done.size())), 40.0) << r.output.substr(at, 80);
}

}  // namespace
}  // namespace brigade
