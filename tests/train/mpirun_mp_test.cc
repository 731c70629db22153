// Workers started by Open MPI's mpirun bootstrap from OMPI_COMM_WORLD_* (no brigade launcher)
// and train exactly like a `brigade launch` job of the same size: same algorithm, same data
// slices, so the final weights are bitwise identical.
#include <gtest/gtest.h>

#include <fstream>

#include "brigade/base/file_io.h"
#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

const std::string kConfig = testing::tiny_gpt_config({{"run.name", "\"mpi\""},
                                                      {"run.seed", "3"},
                                                      {"train.steps", "10"},
                                                      {"train.lr", "1e-3"},
                                                      {"train.min_lr", "1e-4"},
                                                      {"train.log_every", "10"},
                                                      {"comm.timeout_s", "60"}});

TEST(Mpirun, TwoRanksTrainAndMatchTheBrigadeLauncher) {
  ASSERT_EQ(run_command("which mpirun").exit_code, 0)
      << "mpirun missing: scripts/install-deps.sh installs openmpi-bin";
  std::string dir = make_temp_dir("mpirun");
  std::string config = dir + "/mpi.toml";
  std::ofstream(config) << kConfig;
  std::string bin = BRIGADE_BINARY;
  // A port of our own so parallel tests do not collide on the default 29500, below Linux's
  // ephemeral range (32768-60999), where other tests' bind-to-0 listeners and outgoing
  // connections take theirs (a run once lost 39640 that way).
  int port = 20000 + static_cast<int>(getpid() % 12000);
  auto mpi = run_command(
      "mpirun -np 2 --allow-run-as-root --oversubscribe -x MASTER_PORT=" + std::to_string(port) +
      " " + bin + " train " + config + " --set run.out_dir=" + dir + "/mpi");
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  EXPECT_NE(mpi.output.find("(openmpi), data parallel over 2"), std::string::npos) << mpi.output;
  auto launch = run_command(bin + " launch --nproc 2 -- train " + config +
                            " --set run.out_dir=" + dir + "/launch");
  ASSERT_EQ(launch.exit_code, 0) << launch.output;
  const auto a = testing::read_checkpoint(dir + "/mpi/mpi/checkpoints/step_00000010",
                                          testing::CkptPart::kModel);
  const auto b = testing::read_checkpoint(dir + "/launch/mpi/checkpoints/step_00000010",
                                          testing::CkptPart::kModel);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "mpirun and brigade launch trained different weights";
}

}  // namespace
}  // namespace brigade
