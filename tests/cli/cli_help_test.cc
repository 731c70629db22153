// The help a user reads is true: every option shows its default, and --set says it takes one
// KEY=VALUE per use (repeated --set options all apply).
#include <gtest/gtest.h>

#include <string>

#include "common/run_command.h"

namespace brigade {
namespace {

using testing::run_command;

std::string brigade(const std::string& args) {
  const auto r = run_command(std::string(BRIGADE_BINARY) + " " + args, 60);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return r.output;
}

TEST(CliHelpTest, OptionsShowTheirDefaults) {
  const std::string generate = brigade("generate --help");
  EXPECT_NE(generate.find("=200"), std::string::npos) << generate;  // --tokens
  EXPECT_NE(generate.find("=0.8"), std::string::npos) << generate;  // --temperature
  const std::string exported = brigade("export --help");
  EXPECT_NE(exported.find("--format TEXT=hf"), std::string::npos) << exported;
  for (const char* command : {"launch", "report", "train", "check-config"}) {
    const std::string help = brigade(std::string(command) + " --help");
    EXPECT_EQ(help.find("=[]"), std::string::npos) << help;  // no empty-list "defaults"
  }
}

TEST(CliHelpTest, SetTakesOneValueAndRepeats) {
  const std::string help = brigade("train --help");
  EXPECT_NE(help.find("--set KEY=VALUE "), std::string::npos) << help;
  EXPECT_EQ(help.find("KEY=VALUE ..."), std::string::npos) << help;
  const std::string config = std::string(BRIGADE_SOURCE_DIR) + "/configs/default.toml";
  const std::string resolved =
      brigade("check-config " + config + " --set train.steps=500 --set train.lr=0.004");
  EXPECT_NE(resolved.find("steps = 500\n"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("lr = 0.004\n"), std::string::npos) << resolved;
}

}  // namespace
}  // namespace brigade
