// SIGTERM (Slurm's preemption signal) or Ctrl-C's SIGINT to `brigade launch` in the middle of
// training: the ranks finish the step, agree on it, save a checkpoint and exit with 128 + the
// signal (143, 130), with no periodic checkpoint configured; running the command again resumes
// at that step and ends bitwise where an uninterrupted run ends. Also under parameter servers
// (BSP), whose servers keep serving until the workers have saved.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <thread>

#include "common/checkpoint_tensors.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "launch/launch_test_util.h"

namespace brigade::interrupt_mp_test {
namespace {

using testing::BackgroundBrigade;
using ::testing::HasSubstr;

constexpr int kSteps = 60;

class Interrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("interrupt");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", std::to_string(kSteps)}, {"train.ckpt_every", "0"}});
  }
  std::vector<std::string> args(const std::string& out, int nproc,
                                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a = {"launch",
                                  "--nproc",
                                  std::to_string(nproc),
                                  "--",
                                  "train",
                                  config_,
                                  "--set",
                                  "run.out_dir=" + dir_ + "/" + out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Steps recorded in out's metrics.jsonl so far.
  size_t steps_done(const std::string& out) {
    return testing::metrics_records(dir_ + "/" + out + "/tiny/metrics.jsonl", "train").size();
  }
  static std::string step_dir(const std::string& run, int step) {
    char name[32];
    std::snprintf(name, sizeof name, "/checkpoints/step_%08d", step);
    return run + name;
  }

  // Interrupts a launch of `nproc` processes with `signo` once it has trained a few steps, checks
  // the save and the exit code, resumes it, and compares with the uninterrupted run.
  void interrupt_and_resume(int signo, int nproc, const std::vector<std::string>& extra) {
    BackgroundBrigade straight(args("straight", nproc, extra), dir_);
    ASSERT_EQ(straight.wait(120), 0) << straight.err();
    // Rank 0 slowed 20 ms a step, so the signal lands well before the end.
    BackgroundBrigade run(args("cut", nproc, extra), dir_,
                          {"BRIGADE_FAULT_SLOW_RANK=0", "BRIGADE_FAULT_SLOW_MS=20"});
    const auto deadline = testing::Clock::now() + std::chrono::seconds(60);
    while (steps_done("cut") < 5 && testing::Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(steps_done("cut"), 5u) << run.err();
    ASSERT_EQ(::kill(run.pid(), signo), 0);
    EXPECT_EQ(run.wait(60), 128 + signo) << run.err();
    const size_t saved = steps_done("cut");
    ASSERT_LT(saved, static_cast<size_t>(kSteps)) << "the run ended before the signal";
    const std::string name = signo == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_THAT(run.err(), HasSubstr(name + " after step " + std::to_string(saved) +
                                     ": saving a checkpoint, then exiting"));
    EXPECT_THAT(run.err(), HasSubstr("stopped after step " + std::to_string(saved)));
    const std::string cut = dir_ + "/cut/tiny";
    ASSERT_FALSE(
        testing::read_checkpoint(step_dir(cut, static_cast<int>(saved)), testing::CkptPart::kModel)
            .empty());
    // The same command again continues from there.
    BackgroundBrigade resumed(args("cut", nproc, extra), dir_);
    ASSERT_EQ(resumed.wait(120), 0) << resumed.err();
    EXPECT_THAT(resumed.err(), HasSubstr("at step " + std::to_string(saved)));
    for (auto part : {testing::CkptPart::kModel, testing::CkptPart::kState}) {
      EXPECT_TRUE(testing::read_checkpoint(step_dir(cut, kSteps), part) ==
                  testing::read_checkpoint(step_dir(dir_ + "/straight/tiny", kSteps), part))
          << "the interrupted and resumed run differs from the uninterrupted one";
    }
  }

  std::string dir_, config_;
};

TEST_F(Interrupt, SigtermSavesTheStepAndTheRunResumesBitwise) {
  interrupt_and_resume(SIGTERM, 2, {});
}

TEST_F(Interrupt, SigintDoesTheSameUnderParameterServers) {
  interrupt_and_resume(SIGINT, 3, {"--set", "sync.method=ps"});
}

}  // namespace
}  // namespace brigade::interrupt_mp_test
