// `brigade privacy` as a user runs it: the real binary, its epsilon against the accountant the
// coordinator runs (fed/privacy_accountant.h) and against a point of Google dp_accounting's
// tests, the noise it solves for (reaches the target, and is the smallest that does), and its
// refusals with exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "brigade/fed/privacy_accountant.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

testing::CommandResult privacy(const std::string& args) {
  return testing::run_command(std::string(BRIGADE_BINARY) + " privacy " + args, 60);
}

nlohmann::json privacy_json(const std::string& args) {
  const testing::CommandResult run = privacy(args + " --json");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return nlohmann::json::parse(run.output);
}

// Every digit of x, so a value goes to the command as the test holds it.
std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

double accountant_epsilon(double q, double z, int64_t rounds, double delta) {
  PrivacyAccountant a;
  a.compose(q, z, rounds);
  return a.epsilon(delta);
}

// dp_accounting's test_compute_epsilon_delta_gaussian: z = 4.530877117 gives exactly
// (1, 1e-6)-DP for one unsampled Gaussian; the default orders come within 1e-3 of it.
TEST(PrivacyCommand, GaussianPointOfDpAccounting) {
  const nlohmann::json j = privacy_json("--q 1 --noise 4.530877117 --rounds 1 --delta 1e-6");
  EXPECT_NEAR(j["epsilon"].get<double>(), 1.0, 1e-3);
  EXPECT_GE(j["epsilon"].get<double>(), 1.0 - 1e-9) << "RDP may only over-report";
  const testing::CommandResult text = privacy("--q 1 --noise 4.530877117 --rounds 1 --delta 1e-6");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("epsilon = 1 (best RDP order"));
}

// What the command prints is what the coordinator's accountant reports for the same run.
TEST(PrivacyCommand, EpsilonIsTheCoordinatorsAccountant) {
  for (double q : {0.01, 0.2, 1.0}) {
    for (double z : {0.7, 1.1, 3.0}) {
      const nlohmann::json j =
          privacy_json("--q " + num(q) + " --noise " + num(z) + " --rounds 50");
      EXPECT_DOUBLE_EQ(j["epsilon"].get<double>(), accountant_epsilon(q, z, 50, 1e-5))
          << "q " << q << " z " << z;
    }
  }
}

// The solved z reaches the target within 1%, and 0.1% less noise would not reach it.
TEST(PrivacyCommand, SolvedNoiseIsTheSmallestThatReachesTheTarget) {
  struct Case {
    double q;
    int64_t rounds;
    double delta, target;
  };
  for (const Case& c :
       {Case{0.2, 50, 1e-5, 1}, Case{0.2, 50, 1e-5, 4}, Case{0.2, 50, 1e-5, 8},
        Case{0.1, 200, 1e-5, 2}, Case{1, 1, 1e-6, 1}, Case{0.01, 1000, 1e-7, 0.5}}) {
    const std::string setting =
        "--q " + num(c.q) + " --rounds " + std::to_string(c.rounds) + " --delta " + num(c.delta);
    const nlohmann::json solved = privacy_json(setting + " --epsilon " + num(c.target));
    const double z = solved["noise"].get<double>();
    const double eps = solved["epsilon"].get<double>();
    EXPECT_LE(eps, c.target) << setting;
    EXPECT_GE(eps, 0.99 * c.target) << setting;
    // The printed z, given back as --noise, spends what the solver said.
    const nlohmann::json back = privacy_json(setting + " --noise " + num(z));
    EXPECT_LE(back["epsilon"].get<double>(), c.target) << setting << " z " << z;
    EXPECT_GT(accountant_epsilon(c.q, z * 0.999, c.rounds, c.delta), c.target)
        << setting << ": z " << z << " is not the smallest";
  }
}

TEST(PrivacyCommand, NoNoiseIsNoPrivacyAndNoSamplingIsNoLoss) {
  const testing::CommandResult none = privacy("--q 0.5 --noise 0 --rounds 3");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_THAT(none.output, HasSubstr("epsilon = inf"));
  EXPECT_TRUE(privacy_json("--q 0.5 --noise 0 --rounds 3")["epsilon"].is_null());
  const nlohmann::json never = privacy_json("--q 0 --epsilon 1 --rounds 3");
  EXPECT_EQ(never["noise"].get<double>(), 0);
  EXPECT_EQ(never["epsilon"].get<double>(), 0);
}

TEST(PrivacyCommand, RefusesBadInputsWithExitTwo) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : {
           Case{"--q 1.5 --noise 1 --rounds 3", "--q = 1.5: must be in [0, 1]"},
           Case{"--q -0.1 --noise 1 --rounds 3", "--q = -0.1: must be in [0, 1]"},
           Case{"--q nan --noise 1 --rounds 3", "--q = nan: must be in [0, 1]"},
           Case{"--q 0.2 --noise 1 --rounds 0", "--rounds = 0: must be at least 1"},
           Case{"--q 0.2 --noise 1 --rounds 3 --delta 0", "--delta = 0: must be in (0, 1)"},
           Case{"--q 0.2 --noise 1 --rounds 3 --delta 1", "--delta = 1: must be in (0, 1)"},
           Case{"--q 0.2 --noise -1 --rounds 3", "--noise = -1: must be in [0, "},
           Case{"--q 0.2 --epsilon 0 --rounds 3", "--epsilon = 0: must be finite and > 0"},
           Case{"--q 0.2 --epsilon inf --rounds 3", "--epsilon = inf: must be finite and > 0"},
           Case{"--q 0.2 --rounds 3", "give exactly one of --noise"},
           Case{"--q 0.2 --noise 1 --epsilon 2 --rounds 3", "give exactly one of --noise"},
           Case{"--q 1 --epsilon 1e-30 --rounds 100 --delta 1e-9",
                "--epsilon = 1e-30: not reached"},
           Case{"--noise 1 --rounds 3", "--q is required"},
       }) {
    const testing::CommandResult run = privacy(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_THAT(run.output, HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
}  // namespace brigade
