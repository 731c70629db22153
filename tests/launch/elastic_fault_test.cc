// `brigade launch` as an elastic agent, end to end with the real binary: a rank is SIGKILLed or
// SIGSTOPped in the middle of a real (tiny) training run and the launch must restart the group,
// resume from the latest checkpoint and finish with the weights of a run that was never
// interrupted; --min-nproc continues on fewer ranks; an exhausted restart budget ends the
// launch naming the rank and the count, with nothing left running.
//
// The fault lands at a step drawn from a seeded generator (the run is watched through its
// checkpoint folders, one per step), so a failure reproduces with the same fault step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "brigade/base/error.h"
#include "common/checkpoint_tensors.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "launch/launch_test_util.h"

namespace brigade {
namespace {

using testing::BackgroundBrigade;
using testing::Clock;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::processes_of_launch;
using testing::read_text;
using testing::wait_for_file;

constexpr int kSteps = 24;
constexpr double kRunTimeout = 60;  // one launch, restarts included; a run takes ~3 s

// A GPT small enough that a step takes milliseconds; a checkpoint every step, so that a restart
// loses at most one step; a collective timeout longer than any heartbeat timeout here, so that a
// stopped rank is found by its missing heartbeats and not by its peer's collective timing out.
const char* kConfig = R"(
[run]
name = "el"
seed = 11
[model]
vocab = 256
seq_len = 32
d_model = 32
n_layer = 2
n_head = 2
[train]
micro_batch = 8
steps = 24
lr = 3e-3
min_lr = 3e-4
warmup = 2
eval_every = 0
eval_batches = 2
ckpt_every = 1
keep_checkpoints = 3
log_every = 100
[comm]
timeout_s = 60
)";

std::string step_dir(const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08d", step);
  return run + "/checkpoints/" + name;
}

class Elastic : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_dir_ = testing::make_temp_dir("elastic");
    config_ = suite_dir_ + "/el.toml";
    std::ofstream(config_) << kConfig;
    // The uninterrupted reference: the same config on 2 ranks, no faults.
    auto r = testing::run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " +
                                      config_ + " --set run.out_dir=" + suite_dir_ + "/ref",
                                  120);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    reference_ = suite_dir_ + "/ref/el";
  }

  void SetUp() override {
    ASSERT_FALSE(reference_.empty()) << "the reference run failed";
    dir_ = testing::make_temp_dir("elastic");
    static int count = 0;  // run ids are at most 64 characters; test names are longer
    run_id_ = "elastic-" + std::to_string(::getpid()) + "-" + std::to_string(++count);
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    for (pid_t pid : processes_of_launch(run_id_)) ::kill(pid, SIGKILL);
  }

  std::vector<std::string> train_args(const std::vector<std::string>& launch_options) {
    std::vector<std::string> args{"launch", "--run-id", run_id_};
    args.insert(args.end(), launch_options.begin(), launch_options.end());
    args.insert(args.end(), {"--", "train", config_, "--set", "run.out_dir=" + dir_ + "/out"});
    return args;
  }
  std::string run() const { return dir_ + "/out/el"; }

  // The pid of `rank` once the run has checkpointed step `step` (the fault step).
  pid_t rank_at_step(int rank, int step) {
    if (!wait_for_file(step_dir(run(), step), 30)) return -1;
    auto pids = processes_of_launch(run_id_, rank);
    return pids.size() == 1 ? pids[0] : -1;
  }

  void expect_nothing_left() {
    for (int i = 0; i < 50 && !processes_of_launch(run_id_).empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_THAT(processes_of_launch(run_id_), IsEmpty());
  }

  static std::string suite_dir_, config_, reference_;
  std::string dir_, run_id_;
};

std::string Elastic::suite_dir_, Elastic::config_, Elastic::reference_;

// Bitwise: every tensor of the final checkpoint, byte for byte.
void expect_bitwise_equal_weights(const std::string& a, const std::string& b) {
  const auto ta = testing::read_checkpoint(step_dir(a, kSteps), testing::CkptPart::kModel);
  const auto tb = testing::read_checkpoint(step_dir(b, kSteps), testing::CkptPart::kModel);
  ASSERT_FALSE(ta.empty());
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, x] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    const auto& y = tb.at(name).data;
    ASSERT_EQ(x.data.size(), y.size()) << name;
    EXPECT_EQ(std::memcmp(x.data.data(), y.data(), y.size() * sizeof(float)), 0)
        << name << " differs";
  }
}

TEST_F(Elastic, KilledRankRestartsAndEndsWithTheUninterruptedWeights) {
  std::mt19937 rng(20261130);
  const int fault_step = std::uniform_int_distribution<int>(3, kSteps - 6)(rng);
  const int victim = std::uniform_int_distribution<int>(0, 1)(rng);
  SCOPED_TRACE("SIGKILL rank " + std::to_string(victim) + " after step " +
               std::to_string(fault_step));
  BackgroundBrigade launch(train_args({"--nproc", "2", "--max-restarts", "2"}), dir_);
  pid_t pid = rank_at_step(victim, fault_step);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("rank " + std::to_string(victim) + " was killed by SIGKILL"));
  EXPECT_THAT(err, HasSubstr("restart 1 of 2: 2 worker(s)"));
  EXPECT_THAT(err, HasSubstr("run id " + run_id_ + ".r1"));
  EXPECT_THAT(err, HasSubstr("resumed from"));
  EXPECT_THAT(err, HasSubstr("finished after 1 restart(s)"));
  expect_bitwise_equal_weights(run(), reference_);
  expect_nothing_left();
}

// Parameter servers (sync.method = "ps", docs/parameter-servers.md): the server, rank 2 of 2
// workers + 1 server, is SIGKILLed; the restarted group resumes from the checkpoint the workers
// wrote (the servers' state, fetched by worker 0) and ends bitwise where an uninterrupted BSP
// run ends.
TEST_F(Elastic, KilledParameterServerRestartsTheJobFromTheCheckpoint) {
  const std::vector<std::string> ps = {"--set", "sync.method=ps", "--set", "ps.servers=1"};
  std::vector<std::string> ref_args = {
      "launch", "--nproc", "3", "--", "train", config_, "--set", "run.out_dir=" + dir_ + "/ref"};
  ref_args.insert(ref_args.end(), ps.begin(), ps.end());
  BackgroundBrigade reference(ref_args, dir_);
  ASSERT_EQ(reference.wait(kRunTimeout), 0) << reference.err();
  std::mt19937 rng(13);
  const int fault_step = std::uniform_int_distribution<int>(3, kSteps - 6)(rng);
  std::vector<std::string> args = train_args({"--nproc", "3", "--max-restarts", "1"});
  args.insert(args.end(), ps.begin(), ps.end());
  BackgroundBrigade launch(args, dir_);
  pid_t pid = rank_at_step(2, fault_step);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("rank 2 was killed by SIGKILL"));
  EXPECT_THAT(err, HasSubstr("resumed from"));
  EXPECT_THAT(err, HasSubstr("finished after 1 restart(s)"));
  expect_bitwise_equal_weights(run(), dir_ + "/ref/el");
  expect_nothing_left();
}

// Parameter-server workers under ssp (docs/parameter-servers.md): 3 workers + 1 server, every
// step slowed to 40 ms so that the fault lands mid-run. Worker 2 fails after worker 0's step 5;
// the others wait at the staleness bound (s = 2) until it has been silent for
// ps.worker_timeout_s, then go on without it.
class PsWorkerFaults : public Elastic {
 protected:
  BackgroundBrigade start(const std::vector<std::string>& launch_options,
                          const std::vector<std::string>& sets = {}) {
    std::vector<std::string> args = train_args(launch_options);
    args.insert(args.end(),
                {"--set", "sync.method=ps", "--set", "ps.servers=1", "--set", "ps.consistency=ssp",
                 "--set", "ps.staleness=2", "--set", "ps.worker_timeout_s=1"});
    args.insert(args.end(), sets.begin(), sets.end());
    return BackgroundBrigade(args, dir_,
                             {"BRIGADE_FAULT_SLOW_RANK=-1", "BRIGADE_FAULT_SLOW_MS=40"});
  }
  // Worker 0 trained and saved every step.
  void expect_complete_run() {
    EXPECT_EQ(testing::metrics_records(run() + "/metrics.jsonl", "train").size(),
              static_cast<size_t>(kSteps));
    EXPECT_TRUE(wait_for_file(step_dir(run(), kSteps), 0));
  }
  // Waits (bounded) until the launcher's stderr holds `text`.
  static bool wait_for_text(const BackgroundBrigade& launch, const std::string& text) {
    for (int i = 0; i < 3000; ++i) {
      if (launch.err().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

TEST_F(PsWorkerFaults, AKilledWorkerLeavesTheBoundAndTheOthersFinish) {
  BackgroundBrigade launch = start({"--nproc", "4"});
  const pid_t pid = rank_at_step(2, 5);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  const std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("rank 2 was killed by SIGKILL; it leaves the job"));
  EXPECT_THAT(err, HasSubstr("worker 2 sent nothing for"));
  EXPECT_THAT(err, HasSubstr("workers left the bound 1 time(s), joined again 0 time(s)"));
  expect_complete_run();
  expect_nothing_left();
}

// With --max-restarts the launcher starts worker 2 again, alone: it joins the running job at
// the clock the server has for it, with the latest parameters, and every worker's every clock
// is applied exactly once (3 workers x 24 steps).
TEST_F(PsWorkerFaults, ARestartedWorkerRejoinsAtItsClock) {
  BackgroundBrigade launch = start({"--nproc", "4", "--max-restarts", "1"});
  const pid_t pid = rank_at_step(2, 5);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  const std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("it starts again (restart 1 of 1)"));
  EXPECT_THAT(err, HasSubstr("worker 2 joins again (restarted) at clock"));
  EXPECT_THAT(read_text(run() + "/logs/rank_2.log"), HasSubstr("joined the running job at step"));
  EXPECT_THAT(err,
              HasSubstr("parameter server 0: " + std::to_string(3 * kSteps) + " updates applied"));
  expect_complete_run();
  expect_nothing_left();
}

// A stopped worker (SIGSTOP) leaves the bound like a dead one; continued (SIGCONT), it is back
// and finishes its own steps.
TEST_F(PsWorkerFaults, AStoppedWorkerLeavesTheBoundAndComesBack) {
  BackgroundBrigade launch = start({"--nproc", "4"});
  const pid_t pid = rank_at_step(2, 5);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const bool left = wait_for_text(launch, "worker 2 sent nothing for");
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  ASSERT_TRUE(left) << launch.err();
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  const std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("worker 2 is back at clock"));
  EXPECT_THAT(err,
              HasSubstr("parameter server 0: " + std::to_string(3 * kSteps) + " updates applied"));
  expect_complete_run();
  expect_nothing_left();
}

// Under dynamic assignment a killed worker loses only the slice it held; restarted, it takes
// slices again, and worker 0's final evaluation and checkpoint wait for every other worker (the
// drain): 3 x 24 slices, the killed worker's one lost.
TEST_F(PsWorkerFaults, DynamicAssignmentLosesOnlyTheSliceOfAKilledWorker) {
  BackgroundBrigade launch =
      start({"--nproc", "4", "--max-restarts", "1"}, {"--set", "ps.assignment=dynamic"});
  // Worker 0 saves when its step passes a multiple, so step 5 itself may be skipped: wait for
  // any checkpoint from step 5 on.
  bool reached = false;
  for (int i = 0; i < 3000 && !reached; ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(run() + "/checkpoints", ec)) {
      const std::string name = e.path().filename().string();
      reached |= name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos &&
                 std::stoi(name.substr(5)) >= 5;
    }
    if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(reached) << launch.err();
  const auto pids = processes_of_launch(run_id_, 2);
  ASSERT_EQ(pids.size(), 1u) << launch.err();
  ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  const std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("it starts again (restart 1 of 1)"));
  EXPECT_THAT(err, HasSubstr("worker 2 joins again (restarted)"));
  // Two lost when it died in the moment between taking its next slice and pushing its own.
  const auto summary = testing::metrics_records(run() + "/metrics.jsonl", "summary");
  ASSERT_EQ(summary.size(), 1u);
  const int64_t applied = summary[0]["ps_updates_applied"].get<int64_t>();
  EXPECT_TRUE(applied == 3 * kSteps - 1 || applied == 3 * kSteps - 2) << applied;
  EXPECT_THAT(err,
              HasSubstr("parameter server 0: " + std::to_string(applied) + " updates applied"));
  EXPECT_TRUE(wait_for_file(step_dir(run(), kSteps), 0));
  expect_nothing_left();
}

TEST_F(Elastic, StoppedRankIsFoundWithinTheHeartbeatTimeoutAndTheJobCompletes) {
  const double timeout = 2, interval = 0.5;  // heartbeat_interval_for(2 s)
  std::mt19937 rng(7);
  const int fault_step = std::uniform_int_distribution<int>(3, kSteps - 6)(rng);
  BackgroundBrigade launch(
      train_args({"--nproc", "2", "--max-restarts", "1", "--heartbeat-timeout", "2"}), dir_);
  pid_t pid = rank_at_step(1, fault_step);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const auto stopped = Clock::now();
  // Watch the launcher's log for the verdict (bounded).
  double found_after = -1;
  while (Clock::now() - stopped < std::chrono::seconds(15)) {
    if (launch.err().find("rank 1 sent no heartbeat") != std::string::npos) {
      found_after = std::chrono::duration<double>(Clock::now() - stopped).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(found_after, 0) << "never detected:\n" << launch.err();
  // Not before the timeout (the last beat was at most one interval before SIGSTOP), and within
  // it plus the launcher's 100 ms tick and scheduling slack on a loaded machine.
  EXPECT_GE(found_after, timeout - interval - 0.05);
  EXPECT_LE(found_after, timeout + 1.5);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  EXPECT_THAT(launch.err(), HasSubstr("restart 1 of 1: 2 worker(s)"));
  expect_bitwise_equal_weights(run(), reference_);
  expect_nothing_left();
}

TEST_F(Elastic, MinNprocContinuesOnFewerRanks) {
  // The global batch must stay the same when the world shrinks (the sampler refuses to resume
  // a different one): the worker derives grad_accum from WORLD_SIZE, 2 ranks x 1 or 1 x 2.
  std::string script = "exec \"" + std::string(BRIGADE_BINARY) + "\" train \"" + config_ +
                       "\" --set run.out_dir=\"" + dir_ +
                       "/out\" --set train.grad_accum=$((2 / WORLD_SIZE))";
  BackgroundBrigade launch({"launch", "--run-id", run_id_, "--nproc", "2", "--min-nproc", "1",
                            "--max-restarts", "1", "--exec", "--", "/bin/sh", "-c", script},
                           dir_);
  pid_t pid = rank_at_step(1, 5);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(launch.wait(kRunTimeout), 0) << launch.err();
  std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("the slot of rank 1 is retired: continuing on 1 worker(s)"));
  EXPECT_THAT(err, HasSubstr("restart 1 of 1: 1 worker(s), ranks 0-0 of 1"));
  EXPECT_THAT(err, HasSubstr("data parallel over 1"));
  auto manifest = nlohmann::json::parse(read_text(run() + "/manifest.json"));
  EXPECT_EQ(manifest.value("world_size", -1), 1) << manifest.dump();
  // One rank accumulating two micro-batches computes the same update as two ranks averaging
  // theirs, up to f32 rounding (sums in another order), which AdamW carries forward and
  // amplifies where a gradient is mostly rounding noise (see parallel/dp_run_helpers.h): measured
  // 1.3e-5 of the largest weight. The bound, 1e-4, is still below what one lost or repeated step
  // moves a weight (about the learning rate, >= 3e-4 here).
  const auto ta = testing::read_checkpoint(step_dir(run(), kSteps), testing::CkptPart::kModel);
  const auto tb = testing::read_checkpoint(step_dir(reference_, kSteps), testing::CkptPart::kModel);
  ASSERT_FALSE(ta.empty());
  double max_abs = 0, max_diff = 0;
  for (const auto& [name, x] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    const auto& y = tb.at(name).data;
    ASSERT_EQ(x.data.size(), y.size()) << name;
    for (size_t i = 0; i < y.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(static_cast<double>(y[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(x.data[i]) - y[i]));
    }
  }
  EXPECT_LE(max_diff, 1e-4 * max_abs);
  expect_nothing_left();
}

TEST_F(Elastic, ExhaustedRestartsEndTheLaunchNamingTheRankAndTheCount) {
  // Rank 1 fails every time; rank 0 would run forever. Each attempt records its rendezvous.
  std::string script =
      "D='" + dir_ +
      "'\n"
      "echo \"$MASTER_PORT $BRIGADE_STORE_DIR\" > \"$D/rdzv.$BRIGADE_RUN_ID.$RANK\"\n"
      "if [ $RANK = 1 ]; then sleep 0.2; exit 3; fi\n"
      "exec sleep 1000\n";
  BackgroundBrigade launch({"launch", "--run-id", run_id_, "--nproc", "2", "--max-restarts", "2",
                            "--grace", "1", "--exec", "--", "/bin/sh", "-c", script},
                           dir_);
  EXPECT_EQ(launch.wait(kRunTimeout), kExitWorkerFailed) << launch.err();
  std::string err = launch.err();
  EXPECT_THAT(err, HasSubstr("giving up after 2 restart(s): rank 1 exited with exit code 3"));
  EXPECT_THAT(err, HasSubstr("no restart left (2 of 2 used)"));
  EXPECT_THAT(err, HasSubstr("restart 2 of 2"));
  EXPECT_THAT(err, Not(HasSubstr("restart 3")));
  // Three attempts, each with its own run id, store folder (gone now) and port line.
  std::set<std::string> stores;
  for (const std::string& id : {run_id_, run_id_ + ".r1", run_id_ + ".r2"}) {
    std::string rdzv = read_text(dir_ + "/rdzv." + id + ".0");
    ASSERT_FALSE(rdzv.empty()) << "no attempt with run id " << id;
    std::string store = rdzv.substr(rdzv.find(' ') + 1);
    store.erase(store.find_last_not_of('\n') + 1);
    EXPECT_NE(store.find(id), std::string::npos) << store;
    EXPECT_FALSE(wait_for_file(store, 0)) << store << " was not removed";
    stores.insert(store);
  }
  EXPECT_EQ(stores.size(), 3u);
  expect_nothing_left();
}

TEST_F(Elastic, HungRankWithoutRestartsEndsTheLaunchWithExitCode7) {
  BackgroundBrigade launch(train_args({"--nproc", "2", "--heartbeat-timeout", "1"}), dir_);
  pid_t pid = rank_at_step(0, 3);
  ASSERT_GT(pid, 0) << launch.err();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  EXPECT_EQ(launch.wait(kRunTimeout), kExitWorkerFailed) << launch.err();
  EXPECT_LT(launch.elapsed_s(), 20);
  EXPECT_THAT(launch.err(), HasSubstr("rank 0 sent no heartbeat for"));
  EXPECT_THAT(launch.err(), HasSubstr("no restarts allowed (--max-restarts 0)"));
  expect_nothing_left();
}

}  // namespace
}  // namespace brigade
