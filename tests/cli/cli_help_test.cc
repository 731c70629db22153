// The help a user reads is true: every option shows its default (a required one shows none),
// choices are named as a user types them, train's help points to the key reference and
// check-config, and --set says it takes one KEY=VALUE per use (repeated --set options all
// apply).
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

TEST(CliHelpTest, RequiredOptionsShowNoDefaultAndChoicesReadAsTyped) {
  const std::string launch = brigade("launch --help");
  EXPECT_NE(launch.find("--nproc_per_node INT REQUIRED"), std::string::npos) << launch;
  const std::string keygen = brigade("keygen --help");
  EXPECT_NE(keygen.find("--kind curve|tls (default curve)"), std::string::npos) << keygen;
  EXPECT_EQ(keygen.find("->"), std::string::npos) << keygen;  // no parser internals
  const auto bad =
      run_command(std::string(BRIGADE_BINARY) + " keygen --out /nonexistent/k --kind x", 60);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("x not in {curve,tls}"), std::string::npos) << bad.output;
  const std::string train = brigade("train --help");
  EXPECT_NE(train.find("docs/configuration.md"), std::string::npos) << train;
  EXPECT_NE(train.find("brigade check-config"), std::string::npos) << train;
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
