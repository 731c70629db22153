// A config that its job cannot run is refused before any worker starts: `brigade launch`
// checks the layout against the workers it is about to start and the data paths they will read,
// and `brigade check-config --nproc N` does the same checks without starting anything; neither
// prints a resolved config or starts a rank after an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/run_command.h"

namespace brigade {
namespace {

using testing::CommandResult;
using testing::make_temp_dir;
using testing::run_command;

class JobCheck : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("job-check"); }

  CommandResult brigade(const std::string& args) {
    return run_command(std::string(BRIGADE_BINARY) + " " + args, 60);
  }
  std::string config(const std::string& name) const {
    return std::string(BRIGADE_SOURCE_DIR) + "/configs/" + name + ".toml";
  }
  std::string launch(int nproc, const std::string& cfg, const std::string& extra) const {
    return "launch --nproc " + std::to_string(nproc) + " -- train " + config(cfg) +
           " --set run.out_dir=" + dir_ + " " + extra;
  }
  // Nothing ran: no rank spoke and no run folder was made.
  void expect_nothing_started(const CommandResult& r) const {
    EXPECT_EQ(r.output.find("[rank "), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::is_empty(dir_)) << r.output;
  }

  std::string dir_;
};

TEST_F(JobCheck, LaunchRefusesADataParallelDegreeThatIsNotTheWorld) {
  const auto r = brigade(launch(2, "default", "--set parallel.dp=1"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("parallel.dp = 1: the job has 2 processes"), std::string::npos)
      << r.output;
  expect_nothing_started(r);
}

// Krum over DiLoCo's quorum needs more than 2f + 2 replicas in every outer step: with 3 ranks
// and f = 1 no quorum can give that, which launch says before any worker starts (the workers
// would each refuse it, exit 2, only after their rendezvous); with 6 ranks it is accepted.
TEST_F(JobCheck, LaunchRefusesKrumOverAQuorumTooSmallForIt) {
  const std::string krum =
      "--set sync.quorum=0.8 --set sync.outer_aggregator=krum --set sync.outer_byzantine=1";
  const auto r = brigade(launch(3, "diloco", krum));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs more than 2f + 2 = 4 replicas in every outer step; sync.quorum "
                          "= 0.8 of 3 replicas guarantees 3"),
            std::string::npos)
      << r.output;
  expect_nothing_started(r);
  const auto six = brigade("check-config " + config("diloco") + " --nproc 6 " + krum);
  EXPECT_EQ(six.exit_code, 0) << six.output;  // 0.8 of 6 guarantees 5
}

TEST_F(JobCheck, LaunchRefusesMissingDataBeforeStartingWorkers) {
  const auto r = brigade(
      launch(2, "default", "--set data.source=text --set data.path=" + dir_ + "/nothing.txt"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("data.path: " + dir_ + "/nothing.txt: no such file"), std::string::npos)
      << r.output;
  expect_nothing_started(r);
}

TEST_F(JobCheck, CheckConfigChecksTheWorldSizeAndPrintsNothingAfterAnError) {
  const auto bad = brigade("check-config " + config("tp") + " --nproc 3");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("!= world size 3"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("[run]"), std::string::npos) << bad.output;

  const auto torchrun_flag = brigade("check-config " + config("tp") + " --nproc-per-node 2");
  EXPECT_EQ(torchrun_flag.exit_code, 0) << torchrun_flag.output;
  EXPECT_NE(torchrun_flag.output.find("[run]"), std::string::npos);
  EXPECT_NE(torchrun_flag.output.find("# hybrid mesh: pp=1 x dp=1 x ep=1 x tp=2"),
            std::string::npos)
      << torchrun_flag.output;

  const auto ps = brigade("check-config " + config("ps") + " --nproc 1");
  EXPECT_EQ(ps.exit_code, 2) << ps.output;
  EXPECT_NE(ps.output.find("none would be left to train"), std::string::npos) << ps.output;

  const auto dp = brigade("check-config " + config("default") + " --nproc 4 --set parallel.dp=2");
  EXPECT_EQ(dp.exit_code, 2) << dp.output;
  EXPECT_EQ(dp.output.find("[run]"), std::string::npos) << dp.output;
}

TEST_F(JobCheck, CheckConfigChecksDataPaths) {
  const auto file = brigade("check-config " + config("default") +
                            " --set data.source=text --set data.path=" + dir_ + "/missing.txt");
  EXPECT_EQ(file.exit_code, 3) << file.output;
  EXPECT_NE(file.output.find("missing.txt: no such file"), std::string::npos) << file.output;
  EXPECT_EQ(file.output.find("[run]"), std::string::npos) << file.output;

  const auto glob = brigade("check-config " + config("default") +
                            " --set data.source=text --set 'data.path=\"" + dir_ + "/*.txt\"'");
  EXPECT_EQ(glob.exit_code, 3) << glob.output;
  EXPECT_NE(glob.output.find("no file matches the pattern"), std::string::npos) << glob.output;

  const auto shards = brigade("check-config " + config("default") +
                              " --set data.source=shards --set data.path=" + dir_ + "/none");
  EXPECT_EQ(shards.exit_code, 3) << shards.output;
  EXPECT_NE(shards.output.find("is not a folder (it does not exist)"), std::string::npos)
      << shards.output;
}

}  // namespace
}  // namespace brigade
