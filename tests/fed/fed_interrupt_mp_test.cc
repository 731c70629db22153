// SIGTERM (Slurm's preemption signal) to a federation's `brigade launch`: the coordinator ends
// the round in flight, saves its state and exits with 128 + 15; the clients save theirs; running
// the same command again continues from the saved round, and the federation ends exactly where
// an uninterrupted one does (global model, server optimizer, control variates). A signal that
// comes while the coordinator waits inside a round ends the wait at once.
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

// SIGTERM while the coordinator waits inside a round (client 0 answers round 2 only after 120 s,
// fed.round_deadline_s is 300): the wait ends at the signal, the round is dropped unaggregated,
// round 1 is what is saved (state and checkpoint), and the launcher exits 128 + 15 within
// seconds, not after the deadline or a SIGKILL.
TEST_F(Federation, SigtermDuringARoundsWaitEndsItAtOnce) {
  const std::string fed = "rounds = 4\nlocal_steps = 1\nround_deadline_s = 300\n";
  const std::string dir = this->dir() + "/waiting";
  std::filesystem::create_directories(dir);
  testing::BackgroundBrigade launch(args_of(command("waiting", fed)), dir,
                                    {"BRIGADE_FAULT_FED_LATE=0:2:120"});
  const std::string metrics = dir + "/fed/metrics.jsonl";
  bool signalled = false;
  for (int i = 0; i < 6000 && !signalled; ++i) {  // at most 60 s
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::filesystem::exists(metrics) && !testing::metrics_records(metrics, "round").empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // round 2 is waiting
      signalled = ::kill(launch.pid(), SIGTERM) == 0;
    }
  }
  ASSERT_TRUE(signalled) << launch.err();
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(launch.wait(60), 128 + SIGTERM) << launch.out() << launch.err();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_LT(took, 20.0) << "the coordinator waited on after SIGTERM";
  EXPECT_EQ(coordinator_state("waiting").int_or("next_round", -1), 1);
  EXPECT_NE(launch.err().find("interrupted during round 2"), std::string::npos) << launch.err();
  EXPECT_TRUE(std::filesystem::exists(dir + "/fed/checkpoints/step_00000001")) << launch.err();
}

}  // namespace
}  // namespace brigade
