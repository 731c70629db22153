// The elastic agent's restart decisions (runtime/launcher_policy.h), without processes.
#include "brigade/runtime/launcher_policy.h"

#include <gtest/gtest.h>

#include "brigade/base/error.h"

namespace brigade {
namespace {

LaunchOptions options(int nproc, int max_restarts, int min_nproc = 0, bool exec_raw = false) {
  LaunchOptions o;
  o.nproc = nproc;
  o.max_restarts = max_restarts;
  o.min_nproc = min_nproc;
  o.exec_raw = exec_raw;
  o.args = {"train", "x.toml"};
  return o;
}

GroupOutcome failed(int rank, int exit_code = -1) {
  GroupOutcome f;
  f.kind = GroupOutcome::Kind::kWorkerFailed;
  f.rank = rank;
  f.how = exit_code >= 0 ? "exited with exit code " + std::to_string(exit_code)
                         : "was killed by SIGKILL";
  f.exit_code = exit_code;
  return f;
}

TEST(LauncherPolicy, RestartsTheWholeGroupUntilTheBudgetIsSpent) {
  auto o = options(4, 2);
  for (int done = 0; done < 2; ++done) {
    auto d = decide_restart(o, done, 4, failed(1));
    EXPECT_TRUE(d.restart) << done;
    EXPECT_EQ(d.nproc, 4) << "without --min-nproc every restart uses all workers";
  }
  auto d = decide_restart(o, 2, 4, failed(1));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.reason.find("2 of 2"), std::string::npos) << d.reason;
  d = decide_restart(options(4, 0), 0, 4, failed(3, kExitComm));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.reason.find("--max-restarts 0"), std::string::npos) << d.reason;
}

TEST(LauncherPolicy, MinNprocRetiresOneSlotPerFailureDownToTheMinimum) {
  auto o = options(4, 5, 2);
  int n = 4;
  std::vector<int> sizes;
  for (int done = 0; done < 4; ++done) {
    auto d = decide_restart(o, done, n, failed(0));
    ASSERT_TRUE(d.restart);
    sizes.push_back(n = d.nproc);
  }
  EXPECT_EQ(sizes, (std::vector<int>{3, 2, 2, 2}));
  // A hang is a failure like any other.
  GroupOutcome hung = failed(1);
  hung.hung = true;
  EXPECT_EQ(decide_restart(o, 0, 4, hung).nproc, 3);
}

TEST(LauncherPolicy, FailuresARestartWouldRepeatAreNotRetried) {
  // 3: a missing or corrupt file (token ids beyond the tokenizer's vocabulary, a malformed
  // merges file) is read again by the restarted worker.
  for (int code : {kExitConfig + 0, kExitIo + 0, kExitNonFinite + 0}) {
    auto d = decide_restart(options(2, 3), 0, 2, failed(0, code));
    EXPECT_FALSE(d.restart) << code;
    EXPECT_NE(d.reason.find("exit code " + std::to_string(code)), std::string::npos) << d.reason;
  }
  EXPECT_NE(
      decide_restart(options(2, 3), 0, 2, failed(0, kExitIo)).reason.find("missing or corrupt"),
      std::string::npos);
  // 4: the restart falls back to the previous valid checkpoint.
  for (int code : {1, kExitCheckpoint + 0, kExitComm + 0, 137}) {
    EXPECT_TRUE(decide_restart(options(2, 3), 0, 2, failed(0, code)).restart) << code;
  }
  // --exec: the exit codes are not brigade's, so they say nothing about a restart.
  EXPECT_TRUE(decide_restart(options(2, 3, 0, true), 0, 2, failed(0, kExitConfig)).restart);
  EXPECT_TRUE(decide_restart(options(2, 3, 0, true), 0, 2, failed(0, kExitIo)).restart);
  // A worker that outlived SIGKILL may still hold the rendezvous or the run folder.
  GroupOutcome stuck = failed(0);
  stuck.gave_up = true;
  EXPECT_FALSE(decide_restart(options(2, 3), 0, 2, stuck).restart);
}

}  // namespace
}  // namespace brigade
