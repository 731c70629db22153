// SIGTERM (Slurm's preemption signal) to a federation's `brigade launch`: the coordinator ends
// the round in flight, saves its state and exits with 128 + 15; the clients save theirs; running
// the same command again continues from the saved round, and the federation ends exactly where
// an uninterrupted one does (global model, server optimizer, control variates).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include "common/metrics_records.h"
#include "fed/fed_test_util.h"
#include "launch/launch_test_util.h"

namespace brigade {
namespace {

using Federation = testing::TinyFederation;

std::vector<std::string> args_of(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> args;
  for (std::string a; in >> a;) args.push_back(a);
  args.erase(args.begin());  // the binary itself
  return args;
}

TEST_F(Federation, SigtermSavesTheRoundAndTheRunContinuesExactly) {
  const std::string fed =
      "rounds = 40\nlocal_steps = 2\nstrategy = \"scaffold\"\n"
      "server_optimizer = \"adam\"\nserver_lr = 0.03\n";
  run("whole", fed);

  const std::string parts = dir() + "/parts";
  std::filesystem::create_directories(parts);
  testing::BackgroundBrigade launch(args_of(command("parts", fed)), parts);
  const std::string metrics = parts + "/fed/metrics.jsonl";
  bool signalled = false;
  for (int i = 0; i < 6000 && !signalled; ++i) {  // at most 60 s
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::filesystem::exists(metrics) && !testing::metrics_records(metrics, "round").empty()) {
      signalled = ::kill(launch.pid(), SIGTERM) == 0;
    }
  }
  ASSERT_TRUE(signalled) << launch.err();
  ASSERT_EQ(launch.wait(120), 128 + SIGTERM) << launch.out() << launch.err();
  const int64_t saved = coordinator_state("parts").int_or("next_round", -1);
  std::printf("SIGTERM after round 1 was recorded: saved at round %lld of 40\n",
              static_cast<long long>(saved));
  EXPECT_GE(saved, 1);
  EXPECT_LT(saved, 40) << "the signal arrived after the last round: nothing was interrupted";
  EXPECT_NE(launch.err().find("interrupted"), std::string::npos) << launch.err();

  run("parts", fed);
  const auto whole = coordinator_state("whole"), resumed = coordinator_state("parts");
  EXPECT_EQ(resumed.int_or("next_round", -1), 40);
  EXPECT_EQ(resumed.tensors, whole.tensors);
}

}  // namespace
}  // namespace brigade
