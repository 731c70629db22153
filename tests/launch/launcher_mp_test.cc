// `brigade launch` as users run it: the real binary starts small /bin/sh workers (--exec), and
// the tests check the environment contract, the output relay, and that every way a launch can
// end (a worker failing, killed, ignoring SIGTERM, the launcher signalled or killed) ends
// within a bounded time with no process of the launch left in the process table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <set>
#include <string>

#include "brigade/base/error.h"
#include "common/run_command.h"
#include "launch/launch_test_util.h"

namespace brigade {
namespace {

using ::testing::AllOf;
using testing::BackgroundBrigade;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::lines_of;
using ::testing::Not;
using testing::processes_with_env;
using testing::read_text;
using testing::wait_for_file;

// Upper bound for any launch here to end; the launches themselves take well under a second
// except where a grace period is waited out on purpose.
constexpr double kLaunchTimeout = 15;

class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("launch");
    ASSERT_FALSE(dir_.empty());
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    run_id_ = std::string("t-") + info->name() + "-" + std::to_string(::getpid());
    // Launches put their store folder under $TMPDIR: keep it (and what a killed launcher
    // leaves) in the test's folder.
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    // A failed test must not leave sleepers behind for the next one.
    for (pid_t pid : processes_with_env("BRIGADE_RUN_ID=" + run_id_)) ::kill(pid, SIGKILL);
  }

  // `launch --exec --run-id <id> <options> -- /bin/sh -c <script> <marker>`. $D in the script
  // (exported) is the test's directory.
  std::vector<std::string> launch_args(int nproc, const std::string& script,
                                       const std::vector<std::string>& options = {}) {
    std::vector<std::string> args{"launch", "--nproc",  std::to_string(nproc),
                                  "--exec", "--run-id", run_id_};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", "D='" + dir_ + "'; export D\n" + script,
                             "launch-test-worker-" + run_id_});
    return args;
  }

  std::vector<pid_t> leftovers() { return processes_with_env("BRIGADE_RUN_ID=" + run_id_); }

  // Processes of the launch may still be in the act of dying when the launcher has returned
  // only if the launcher failed to reap them; give the kernel a moment, then look.
  void expect_nothing_left() {
    for (int i = 0; i < 20 && !leftovers().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_THAT(leftovers(), IsEmpty()) << "processes of launch " << run_id_ << " remain";
  }

  std::string dir_;
  std::string run_id_;
};

// Shell snippet: wait (bounded, 10 s) for file $D/NAME.
std::string await(const std::string& name) {
  return "i=0; while [ ! -f \"$D/" + name +
         "\" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); "
         "done\n";
}

// Shell snippet: write this shell's pid to $D/NAME atomically.
std::string write_pid(const std::string& name) {
  return "echo $$ > \"$D/" + name + ".tmp\" && mv \"$D/" + name + ".tmp\" \"$D/" + name + "\"\n";
}

struct WorkerEnv {
  int rank, world, local_rank, local_world, port;
  std::string addr, run_id, store_dir, store_dir_exists;
};

const char* kWriteEnv =
    "if [ -d \"$BRIGADE_STORE_DIR\" ]; then exists=yes; else exists=no; fi\n"
    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
    "$BRIGADE_RUN_ID ${BRIGADE_STORE_DIR:-unset} $exists\" > \"$D/env.$RANK.tmp\" && "
    "mv \"$D/env.$RANK.tmp\" \"$D/env.$RANK\"\n";

WorkerEnv read_env(const std::string& path) {
  WorkerEnv e{-1, -1, -1, -1, -1, "", "", "", ""};
  std::istringstream in(read_text(path));
  in >> e.rank >> e.world >> e.local_rank >> e.local_world >> e.addr >> e.port >> e.run_id >>
      e.store_dir >> e.store_dir_exists;
  return e;
}

TEST_F(Launch, EnvironmentContractOnOneNode) {
  // No --run-id: the launcher makes one. Stale contract variables in the launcher's own
  // environment must not reach the workers.
  std::vector<std::string> args = launch_args(3, kWriteEnv);
  args.erase(args.begin() + 4, args.begin() + 6);  // drop --run-id <id>
  BackgroundBrigade launch(args, dir_,
                           {"RANK=99", "WORLD_SIZE=99", "BRIGADE_RUN_ID=stale",
                            "BRIGADE_STORE_DIR=/stale", "TMPDIR=" + dir_});
  ASSERT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  std::set<int> ports;
  std::set<std::string> run_ids, store_dirs;
  for (int r = 0; r < 3; ++r) {
    WorkerEnv e = read_env(dir_ + "/env." + std::to_string(r));
    EXPECT_EQ(e.rank, r);
    EXPECT_EQ(e.world, 3);
    EXPECT_EQ(e.local_rank, r);
    EXPECT_EQ(e.local_world, 3);
    EXPECT_EQ(e.addr, "127.0.0.1");
    EXPECT_GT(e.port, 0);
    EXPECT_LE(e.port, 65535);
    EXPECT_EQ(e.store_dir_exists, "yes") << "BRIGADE_STORE_DIR=" << e.store_dir;
    ports.insert(e.port);
    run_ids.insert(e.run_id);
    store_dirs.insert(e.store_dir);
  }
  ASSERT_EQ(ports.size(), 1u) << "workers disagree on MASTER_PORT";
  ASSERT_EQ(run_ids.size(), 1u) << "workers disagree on BRIGADE_RUN_ID";
  const std::string run_id = *run_ids.begin();
  EXPECT_FALSE(run_id.empty());
  EXPECT_NE(run_id, "stale");
  // One fresh store folder under $TMPDIR, shared by the workers, gone after the launch.
  ASSERT_EQ(store_dirs.size(), 1u) << "workers disagree on BRIGADE_STORE_DIR";
  const std::string store_dir = *store_dirs.begin();
  EXPECT_EQ(store_dir.rfind(dir_ + "/brigade-store-" + run_id + "-", 0), 0u) << store_dir;
  EXPECT_FALSE(wait_for_file(store_dir, 0)) << store_dir << " was not removed";
  // The launcher's start line names the same port and id.
  EXPECT_THAT(launch.err(), AllOf(HasSubstr("127.0.0.1:" + std::to_string(*ports.begin())),
                                  HasSubstr("run id " + run_id)));

  // Another launch gets another run id.
  std::string dir2 = testing::make_temp_dir("launch");
  BackgroundBrigade again(
      {"launch", "--nproc", "1", "--exec", "--", "/bin/sh", "-c", "D='" + dir2 + "'\n" + kWriteEnv},
      dir2);
  ASSERT_EQ(again.wait(kLaunchTimeout), 0) << again.err();
  EXPECT_NE(read_env(dir2 + "/env.0").run_id, run_id);
}

TEST_F(Launch, EnvironmentContractOfTheSecondNode) {
  BackgroundBrigade launch(
      launch_args(2, kWriteEnv,
                  {"--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:29555"}),
      dir_, {"BRIGADE_STORE_DIR=/shared/store", "BRIGADE_STORE_TOKEN=shared-job-token"});
  ASSERT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  for (int local = 0; local < 2; ++local) {
    int rank = 2 + local;  // node_rank * nproc + local
    WorkerEnv e = read_env(dir_ + "/env." + std::to_string(rank));
    EXPECT_EQ(e.rank, rank);
    EXPECT_EQ(e.world, 4);
    EXPECT_EQ(e.local_rank, local);
    EXPECT_EQ(e.local_world, 2);
    EXPECT_EQ(e.addr, "127.0.0.1");
    EXPECT_EQ(e.port, 29555);
    EXPECT_EQ(e.run_id, run_id_);  // --run-id is passed through, the same on every node
    // No folder is shared between nodes: the user's choice (if any) is passed on.
    EXPECT_EQ(e.store_dir, "/shared/store");
  }
  EXPECT_FALSE(wait_for_file(dir_ + "/env.0", 0)) << "node 1 must not run ranks of node 0";
}

// torchrun's command line, spelled as torchrun users type it, gives the contract of the
// --nproc/--master spelling above.
TEST_F(Launch, TorchrunFlagsWorkAsTheyAre) {
  std::vector<std::string> args =
      launch_args(2, kWriteEnv,
                  {"--nnodes", "2:2", "--node_rank", "1", "--master-addr", "127.0.0.1",
                   "--master-port", "29556", "--max_restarts", "0"});
  args[1] = "--nproc-per-node";  // instead of --nproc
  BackgroundBrigade launch(args, dir_,
                           {"BRIGADE_STORE_DIR=/shared/store", "BRIGADE_STORE_TOKEN=job-token"});
  ASSERT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  for (int local = 0; local < 2; ++local) {
    WorkerEnv e = read_env(dir_ + "/env." + std::to_string(2 + local));
    EXPECT_EQ(e.rank, 2 + local);
    EXPECT_EQ(e.world, 4);
    EXPECT_EQ(e.local_rank, local);
    EXPECT_EQ(e.local_world, 2);
    EXPECT_EQ(e.addr, "127.0.0.1");
    EXPECT_EQ(e.port, 29556);
  }
  // --standalone with the underscore spelling of the process count: one node, a free port.
  std::string dir2 = testing::make_temp_dir("launch");
  BackgroundBrigade standalone(
      {"launch", "--standalone", "--nproc_per_node", "2", "--rdzv-id", run_id_ + "-s", "--exec",
       "--", "/bin/sh", "-c", "D='" + dir2 + "'\n" + kWriteEnv},
      dir2);
  ASSERT_EQ(standalone.wait(kLaunchTimeout), 0) << standalone.err();
  for (int r = 0; r < 2; ++r) {
    WorkerEnv e = read_env(dir2 + "/env." + std::to_string(r));
    EXPECT_EQ(e.world, 2);
    EXPECT_EQ(e.run_id, run_id_ + "-s");
    EXPECT_GT(e.port, 0);
  }
}

// A launcher started from a script in the background (or under nohup) inherits SIGINT, SIGQUIT
// and SIGHUP ignored, and ignored signals survive exec: the workers must start with every
// disposition at its default, or a Ctrl-C / SIGHUP never reaches them and the launcher ends up
// SIGKILLing them. Each worker reads its ignored-signal mask from /proc (no shell builtin
// touches it: a non-interactive sh keeps the dispositions it was started with).
TEST_F(Launch, WorkersStartWithNoSignalIgnored) {
  struct sigaction ignore = {}, saved[3];
  ignore.sa_handler = SIG_IGN;
  const int inherited[] = {SIGINT, SIGQUIT, SIGHUP};
  for (int i = 0; i < 3; ++i) ::sigaction(inherited[i], &ignore, &saved[i]);
  BackgroundBrigade launch(launch_args(2, "grep SigIgn /proc/self/status > \"$D/ign.$RANK\"\n"),
                           dir_);
  for (int i = 0; i < 3; ++i) ::sigaction(inherited[i], &saved[i], nullptr);
  ASSERT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  // Signals 32 .. SIGRTMIN-1 belong to glibc (thread cancellation, setxid): sigaction refuses
  // them, so whatever the test's own parent left there is out of the launcher's reach.
  uint64_t reserved = 0;
  for (int sig = 32; sig < SIGRTMIN; ++sig) reserved |= uint64_t{1} << (sig - 1);
  for (int r = 0; r < 2; ++r) {
    std::string line = read_text(dir_ + "/ign." + std::to_string(r));
    ASSERT_EQ(line.rfind("SigIgn:\t", 0), 0u) << line;
    uint64_t ignored = std::stoull(line.substr(8), nullptr, 16);
    EXPECT_EQ(ignored & ~reserved, 0u) << "rank " << r << ": " << line;
  }
}

TEST_F(Launch, OutputIsPrefixedWithTheRank) {
  BackgroundBrigade launch(launch_args(2,
                                       "echo \"out $RANK\"\n"
                                       "echo \"err $RANK\" >&2\n"
                                       "echo \"[rank $RANK] already prefixed\"\n"
                                       "echo\n"
                                       "printf \"partial $RANK\"\n"),
                           dir_);
  ASSERT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  auto out = lines_of(launch.out());
  auto err = lines_of(launch.err());
  for (int r = 0; r < 2; ++r) {
    std::string p = "[rank " + std::to_string(r) + "] ";
    // Rank 0's stdout is the job's data, as the program wrote it; the others' are prefixed.
    std::string o = r == 0 ? "" : p;
    EXPECT_THAT(out, Contains(o + "out " + std::to_string(r)));
    EXPECT_THAT(out, Contains(p + "already prefixed"));
    EXPECT_THAT(out, Contains(o));                                   // the empty line
    EXPECT_THAT(out, Contains(o + "partial " + std::to_string(r)));  // flushed at exit
    EXPECT_THAT(err, Contains(p + "err " + std::to_string(r)));
    EXPECT_THAT(out, Not(Contains(o + "err " + std::to_string(r))));  // streams stay apart
  }
  EXPECT_EQ(out.size(), 8u) << launch.out();
  for (const auto& line : out) EXPECT_THAT(line, Not(HasSubstr("] [rank "))) << line;
}

TEST_F(Launch, RunsBrigadeSubcommandsByDefault) {
  std::string config = std::string(BRIGADE_SOURCE_DIR) + "/configs/default.toml";
  BackgroundBrigade ok({"launch", "--nproc", "2", "--", "check-config", config}, dir_);
  ASSERT_EQ(ok.wait(kLaunchTimeout), 0) << ok.err();
  auto out = lines_of(ok.out());
  EXPECT_THAT(out, Contains("[run]"));  // rank 0's stdout as check-config writes it
  EXPECT_THAT(out, Contains("[rank 1] [run]"));
  // As torchrun users write it, with the program's name first: the same subcommand.
  BackgroundBrigade named({"launch", "--nproc", "2", "--", BRIGADE_BINARY, "check-config", config},
                          dir_);
  ASSERT_EQ(named.wait(kLaunchTimeout), 0) << named.err();
  EXPECT_THAT(lines_of(named.out()), Contains("[rank 1] [run]"));
  // And without `--`: the worker command starts at the first argument that is no launch option
  // or value, so its own --set is the worker's.
  BackgroundBrigade bare({"launch", "--nproc", "2", "--grace", "3", "check-config", config, "--set",
                          "train.steps=70", "--set", "run.name=2024"},
                         dir_);
  ASSERT_EQ(bare.wait(kLaunchTimeout), 0) << bare.err();
  EXPECT_THAT(lines_of(bare.out()), Contains("[rank 1] steps = 70"));
  EXPECT_THAT(lines_of(bare.out()), Contains("name = \"2024\""));

  BackgroundBrigade bad({"launch", "--nproc", "2", "--", "check-config", dir_ + "/missing.toml"},
                        dir_);
  EXPECT_EQ(bad.wait(kLaunchTimeout), kExitWorkerFailed) << bad.err();
  EXPECT_THAT(bad.err(), AllOf(HasSubstr("] brigade: error:"), HasSubstr("missing.toml"),
                               HasSubstr("exited with exit code")));
}

TEST_F(Launch, FailingWorkerStopsTheOthers) {
  BackgroundBrigade launch(
      launch_args(3, "if [ $RANK = 1 ]; then\n" + await("ready.0") + await("ready.2") +
                         "exit 3\nfi\n" + write_pid("pid.$RANK") +
                         "touch \"$D/ready.$RANK\"\nsleep 1000\n"),
      dir_);
  EXPECT_EQ(launch.wait(kLaunchTimeout), kExitWorkerFailed) << launch.err();
  // SIGTERM stopped the sleepers: no need to wait out the default 5 s grace period.
  EXPECT_LT(launch.elapsed_s(), 4.0);
  EXPECT_THAT(launch.err(), HasSubstr("rank 1 exited with exit code 3"));
  EXPECT_THAT(launch.err(), Not(HasSubstr("sending SIGKILL")));
  EXPECT_TRUE(wait_for_file(dir_ + "/pid.0", 0) && wait_for_file(dir_ + "/pid.2", 0))
      << "the other workers never ran";
  expect_nothing_left();
}

TEST_F(Launch, TheCauseIsNamedNotTheWorkerThatLostItsPeer) {
  // Rank 1 ends first with exit code 5 (a brigade worker that lost its peer), rank 0 a moment
  // later with its own error: the launcher names rank 0, the cause.
  BackgroundBrigade launch(launch_args(2,
                                       "if [ $RANK = 1 ]; then exit 5; fi\n"
                                       "sleep 0.2\nexit 3\n"),
                           dir_);
  EXPECT_EQ(launch.wait(kLaunchTimeout), kExitWorkerFailed) << launch.err();
  EXPECT_THAT(launch.err(), HasSubstr("rank 0 exited with exit code 3"));
  EXPECT_THAT(launch.err(), Not(HasSubstr("rank 1 exited with exit code 5")));
  // Alone, a lost peer is still named, half a second later.
  BackgroundBrigade alone(launch_args(2, "if [ $RANK = 1 ]; then exit 5; fi\nsleep 1000\n"), dir_);
  EXPECT_EQ(alone.wait(kLaunchTimeout), kExitWorkerFailed) << alone.err();
  EXPECT_THAT(alone.err(), HasSubstr("rank 1 exited with exit code 5"));
  EXPECT_LT(alone.elapsed_s(), 4.0);
  expect_nothing_left();
}

TEST_F(Launch, KilledWorkerIsReportedAndEverythingStops) {
  BackgroundBrigade launch(launch_args(2, write_pid("pid.$RANK") + "sleep 1000 &\nsleep 1000\n"),
                           dir_);
  ASSERT_TRUE(wait_for_file(dir_ + "/pid.0", 10) && wait_for_file(dir_ + "/pid.1", 10));
  pid_t victim = std::stoi(read_text(dir_ + "/pid.1"));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(launch.wait(kLaunchTimeout), kExitWorkerFailed) << launch.err();
  EXPECT_LT(launch.elapsed_s(), 4.0);
  EXPECT_THAT(launch.err(), HasSubstr("rank 1 was killed by SIGKILL"));
  expect_nothing_left();
}

TEST_F(Launch, WorkerIgnoringSigtermIsKilledAfterGrace) {
  const double grace = 1.0;
  BackgroundBrigade launch(launch_args(2,
                                       "if [ $RANK = 1 ]; then\n" + await("ready.0") +
                                           "exit 1\nfi\n"
                                           "trap '' TERM\n"
                                           "touch \"$D/ready.0\"\n"
                                           "sleep 1000\n",
                                       {"--grace", "1"}),
                           dir_);
  EXPECT_EQ(launch.wait(kLaunchTimeout), kExitWorkerFailed) << launch.err();
  EXPECT_GE(launch.elapsed_s(), grace);
  EXPECT_LT(launch.elapsed_s(), grace + 3.0);
  EXPECT_THAT(launch.err(), AllOf(HasSubstr("rank 1 exited with exit code 1"),
                                  HasSubstr("rank 0 did not stop within 1 s; sending SIGKILL")));
  expect_nothing_left();
}

TEST_F(Launch, SigtermToTheLauncherReachesTheWorkers) {
  BackgroundBrigade launch(launch_args(3,
                                       "trap 'echo stopped > \"$D/term.$RANK\"; exit 0' TERM\n"
                                       "touch \"$D/ready.$RANK\"\n"
                                       "sleep 1000 & wait\n"),
                           dir_);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(wait_for_file(dir_ + "/ready." + std::to_string(r), 10));
  ASSERT_EQ(::kill(launch.pid(), SIGTERM), 0);
  EXPECT_EQ(launch.wait(kLaunchTimeout), 128 + SIGTERM) << launch.err();
  EXPECT_LT(launch.elapsed_s(), 4.0);
  EXPECT_THAT(launch.err(), HasSubstr("received SIGTERM"));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(wait_for_file(dir_ + "/term." + std::to_string(r), 0))
        << "rank " << r << " never saw SIGTERM";
  }
  expect_nothing_left();
}

TEST_F(Launch, SecondSignalKillsAtOnce) {
  // The workers ignore SIGTERM and the grace period is long: only the second signal (as from
  // an impatient Ctrl-C Ctrl-C) ends the launch quickly.
  BackgroundBrigade launch(
      launch_args(2, "trap '' TERM INT\ntouch \"$D/ready.$RANK\"\nsleep 1000\n", {"--grace", "60"}),
      dir_);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(wait_for_file(dir_ + "/ready." + std::to_string(r), 10));
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  ASSERT_TRUE(wait_for_file(dir_ + "/launcher.err", 1));
  for (int i = 0; i < 500 && launch.err().find("received SIGINT") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  EXPECT_EQ(launch.wait(kLaunchTimeout), 128 + SIGINT) << launch.err();
  EXPECT_LT(launch.elapsed_s(), 10.0);
  EXPECT_THAT(launch.err(), HasSubstr("received SIGINT again; sending SIGKILL"));
  expect_nothing_left();
}

TEST_F(Launch, WorkersChildrenDoNotOutliveTheLaunch) {
  // Rank 0 leaves a child in its process group and one that escaped it with setsid, then
  // both workers succeed.
  BackgroundBrigade launch(
      launch_args(2,
                  "if [ $RANK = 0 ]; then\n"
                  "  sleep 1000 &\n"
                  "  echo $! > \"$D/child.tmp\" && mv \"$D/child.tmp\" \"$D/child\"\n"
                  "  setsid sh -c '" +
                      write_pid("escaped") + "exec sleep 1000' &\n" + await("escaped") + "fi\n"),
      dir_);
  EXPECT_EQ(launch.wait(kLaunchTimeout), 0) << launch.err();
  ASSERT_TRUE(wait_for_file(dir_ + "/child", 0));
  ASSERT_TRUE(wait_for_file(dir_ + "/escaped", 0)) << "setsid did not run";
  EXPECT_THAT(launch.err(), HasSubstr("killed 1 leftover process(es)"));
  expect_nothing_left();
}

TEST_F(Launch, WorkersDieWithAKilledLauncher) {
  // PR_SET_PDEATHSIG: nothing of the launcher runs after SIGKILL, the kernel kills the workers.
  BackgroundBrigade launch(launch_args(2, "touch \"$D/ready.$RANK\"\nexec sleep 1000\n"), dir_);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(wait_for_file(dir_ + "/ready." + std::to_string(r), 10));
  ASSERT_EQ(::kill(launch.pid(), SIGKILL), 0);
  EXPECT_EQ(launch.wait(kLaunchTimeout), 128 + SIGKILL);
  expect_nothing_left();
}

TEST(LaunchCli, InvalidOptionsAreConfigErrorsNamingTheOption) {
  ::unsetenv("BRIGADE_STORE_TOKEN");  // the multi-node case below depends on it
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--nproc 0 -- train x", "--nproc 0"},
           {"--nproc 2 --nnodes 0 -- train x", "--nnodes 0"},
           {"--nproc 2 --nnodes 2 --node-rank 2 --master h:1 -- train x", "--node-rank 2"},
           {"--nproc 2 --nnodes 2 -- train x", "--master"},
           {"--nproc 2 --nnodes 2 --master host -- train x", "--master host"},
           {"--nproc 2 --master h:0 -- train x", "--master 'h:0'"},
           {"--nproc 2 --master :80 -- train x", "--master ':80'"},
           {"--nproc 2 --grace -1 -- train x", "--grace -1"},
           {"--nproc 2 --run-id 'a/b' -- train x", "--run-id 'a/b'"},
           {"--nproc 2 --exec -- /nonexistent/prog", "/nonexistent/prog"},
           {"--nproc 2 --exec -- no-such-program-xyz", "no-such-program-xyz"},
           {"--nproc 2 --max-restarts -1 -- train x", "--max-restarts -1"},
           {"--nproc 2 --max-restarts 1 --min-nproc 3 -- train x", "--min-nproc 3"},
           {"--nproc 2 --min-nproc 1 -- train x", "give --max-restarts as well"},
           {"--nproc 2 --nnodes 2 --master h:1 --max-restarts 1 -- train x", "needs --nnodes 1"},
           {"--nproc 2 --nnodes 2 --master h:1 -- train x", "needs BRIGADE_STORE_TOKEN"},
           {"--nproc 2 --heartbeat-timeout -1 -- train x", "--heartbeat-timeout -1"},
           {"--nproc 2", "args"},
           {"--nproc two -- train x", "--nproc"},
           {"--nproc-per-node 2 --nnodes 1:4 -- train x", "--nnodes 1:4: a varying number"},
           {"--nproc-per-node 2 --nnodes 2:x -- train x", "--nnodes 2:x"},
           {"--nproc-per-node 2 --standalone --nnodes 2 --master h:1 -- train x", "--standalone"},
           {"--nproc-per-node 2 --master h:1 --master-port 2 -- train x", "give one of them"},
           {"--nproc_per_node 2 --master-port 70000 -- train x", "--master-port 70000"},
       }) {
    auto r = testing::run_command(std::string(BRIGADE_BINARY) + " launch " + c.args, 30);
    EXPECT_EQ(r.exit_code, kExitConfig) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.expect)) << c.args;
    EXPECT_THAT(r.output, Not(HasSubstr("worker(s), ranks"))) << "started workers: " << c.args;
  }
}

}  // namespace
}  // namespace brigade
