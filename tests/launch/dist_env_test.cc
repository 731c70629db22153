// detect_dist_env() against hand-written environments of each engine: the values it must read,
// the order in which engines are tried, and the ConfigErrors for malformed values.
#include "brigade/runtime/dist_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "brigade/base/error.h"
#include "brigade/runtime/host_port.h"

namespace brigade {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The message of the ConfigError that detect_dist_env(env) throws ("" if none).
std::string config_error(const EnvMap& env) {
  try {
    detect_dist_env(env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnv, NoneIsASingleProcess) {
  DistEnv d = detect_dist_env(EnvMap{{"HOME", "/root"}, {"PATH", "/bin"}});
  EXPECT_EQ(d.source, "none");
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.world_size, 1);
  EXPECT_EQ(d.local_rank, 0);
  EXPECT_EQ(d.local_world_size, 1);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
}

TEST(DistEnv, Torchrun) {
  DistEnv d = detect_dist_env(EnvMap{{"RANK", "5"},
                                     {"WORLD_SIZE", "8"},
                                     {"LOCAL_RANK", "1"},
                                     {"LOCAL_WORLD_SIZE", "4"},
                                     {"MASTER_ADDR", "node07"},
                                     {"MASTER_PORT", "29611"}});
  EXPECT_EQ(d.source, "torchrun");
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.local_world_size, 4);
  EXPECT_EQ(d.master_addr, "node07");
  EXPECT_EQ(d.master_port, 29611);
}

// Everything torchrun (torch.distributed.elastic's local agent) puts into a worker's
// environment. With the agent store the agent holds MASTER_PORT with a torch TCPStore, so
// brigade's store moves to the next port; without it, MASTER_PORT is brigade's.
TEST(DistEnv, TorchrunsWholeEnvironment) {
  EnvMap env{{"LOCAL_RANK", "1"},
             {"RANK", "3"},
             {"GROUP_RANK", "1"},
             {"ROLE_RANK", "3"},
             {"ROLE_NAME", "default"},
             {"LOCAL_WORLD_SIZE", "2"},
             {"WORLD_SIZE", "4"},
             {"GROUP_WORLD_SIZE", "2"},
             {"ROLE_WORLD_SIZE", "4"},
             {"MASTER_ADDR", "10.0.0.1"},
             {"MASTER_PORT", "29500"},
             {"TORCHELASTIC_RESTART_COUNT", "0"},
             {"TORCHELASTIC_MAX_RESTARTS", "0"},
             {"TORCHELASTIC_RUN_ID", "none"},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"},
             {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
             {"OMP_NUM_THREADS", "1"}};
  DistEnv d = detect_dist_env(env);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.local_world_size, 2);
  EXPECT_EQ(d.master_addr, "10.0.0.1");
  EXPECT_EQ(d.master_port, 29501);
  EXPECT_EQ(d.source.rfind("torchrun", 0), 0u);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(detect_dist_env(env).master_port, 29500);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["MASTER_PORT"] = "65535";
  EXPECT_THAT(config_error(env), HasSubstr("MASTER_PORT + 1"));
}

TEST(DistEnv, TorchrunWithoutLocalVariablesIsOneProcessPerNode) {
  // What a Kubernetes PyTorchJob pod sees.
  DistEnv d = detect_dist_env(EnvMap{{"RANK", "2"},
                                     {"WORLD_SIZE", "3"},
                                     {"MASTER_ADDR", "job-master-0"},
                                     {"MASTER_PORT", "23456"}});
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(d.local_rank, 0);
  EXPECT_EQ(d.local_world_size, 1);
}

TEST(DistEnv, TorchrunSingleProcessNeedsNoMaster) {
  DistEnv d = detect_dist_env(EnvMap{{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.master_port, kDefaultMasterPort);
}

TEST(DistEnv, TorchrunWinsOverSlurmAndOpenMpi) {
  // `brigade launch` inside an srun step: the launcher's variables describe this process.
  DistEnv d = detect_dist_env(EnvMap{{"RANK", "3"},
                                     {"WORLD_SIZE", "4"},
                                     {"LOCAL_RANK", "3"},
                                     {"LOCAL_WORLD_SIZE", "4"},
                                     {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", "4000"},
                                     {"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "1"},
                                     {"SLURM_LOCALID", "0"},
                                     {"OMPI_COMM_WORLD_RANK", "0"},
                                     {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(d.source, "torchrun");
  EXPECT_EQ(d.rank, 3);
}

TEST(DistEnv, Slurm) {
  EnvMap env{{"SLURM_PROCID", "5"},
             {"SLURM_NTASKS", "7"},
             {"SLURM_LOCALID", "1"},
             {"SLURM_NODEID", "2"},
             {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
             {"SLURM_TASKS_PER_NODE", "9"},  // the job's list; the step's wins
             {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"}};
  DistEnv d = detect_dist_env(env);
  EXPECT_EQ(d.source, "slurm");
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.world_size, 7);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.local_world_size, 2);  // node 2 is the third of "2,2,2"
  EXPECT_EQ(d.master_addr, "10.1.2.3");
  EXPECT_EQ(d.master_port, kDefaultMasterPort);

  env["SLURM_NODEID"] = "3";  // the last node runs one task
  env["SLURM_PROCID"] = "6";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(detect_dist_env(env).local_world_size, 1);

  env["MASTER_ADDR"] = "node001";  // an explicit master beats the launch node
  env["MASTER_PORT"] = "12345";
  d = detect_dist_env(env);
  EXPECT_EQ(d.master_addr, "node001");
  EXPECT_EQ(d.master_port, 12345);
}

TEST(DistEnv, SlurmWithoutTaskListFallsBackToJobTasksPerNode) {
  DistEnv d = detect_dist_env(EnvMap{{"SLURM_PROCID", "1"},
                                     {"SLURM_NTASKS", "4"},
                                     {"SLURM_LOCALID", "1"},
                                     {"SLURM_TASKS_PER_NODE", "4"},
                                     {"MASTER_ADDR", "h"}});
  EXPECT_EQ(d.local_world_size, 4);
}

TEST(DistEnv, OpenMpi) {
  EnvMap env{{"OMPI_COMM_WORLD_RANK", "3"},
             {"OMPI_COMM_WORLD_SIZE", "4"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  DistEnv d = detect_dist_env(env);
  EXPECT_EQ(d.source, "openmpi");
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.local_world_size, 2);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.master_port, kDefaultMasterPort);
  env["MASTER_ADDR"] = "10.0.0.9";
  env["MASTER_PORT"] = "31000";
  d = detect_dist_env(env);
  EXPECT_EQ(d.master_addr, "10.0.0.9");
  EXPECT_EQ(d.master_port, 31000);
}

TEST(DistEnv, OpenMpiWinsOverInheritedSlurm) {
  // mpirun in a Slurm allocation: SLURM_PROCID belongs to the per-node daemon, not the rank.
  DistEnv d = detect_dist_env(EnvMap{{"OMPI_COMM_WORLD_RANK", "3"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                     {"SLURM_PROCID", "1"},
                                     {"SLURM_NTASKS", "2"},
                                     {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(d.source, "openmpi");
  EXPECT_EQ(d.rank, 3);
}

TEST(DistEnv, ErrorsNameTheVariableAndValue) {
  EnvMap base{{"RANK", "1"},        {"WORLD_SIZE", "4"},
              {"LOCAL_RANK", "1"},  {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  ASSERT_EQ(config_error(base), "");
  struct Case {
    const char* name;
    const char* value;  // nullptr: unset
    const char* expect;
  };
  for (const Case& c : std::vector<Case>{
           {"RANK", "abc", "RANK='abc'"},
           {"RANK", "-1", "RANK='-1'"},
           {"RANK", "1x", "RANK='1x'"},
           {"RANK", " 1", "RANK=' 1'"},
           {"RANK", "", "RANK=''"},
           {"RANK", "4", "must be less than WORLD_SIZE=4"},
           {"RANK", "99999999999999999999", "out of range"},
           {"WORLD_SIZE", "0", "WORLD_SIZE='0'"},
           {"WORLD_SIZE", nullptr, "WORLD_SIZE is not set"},
           {"RANK", nullptr, "RANK is not set"},
           {"LOCAL_RANK", "2", "LOCAL_RANK='2' must be less than LOCAL_WORLD_SIZE=2"},
           {"LOCAL_WORLD_SIZE", "5", "LOCAL_WORLD_SIZE='5' must be at most WORLD_SIZE=4"},
           {"MASTER_PORT", "0", "MASTER_PORT='0'"},
           {"MASTER_PORT", "65536", "MASTER_PORT='65536'"},
           {"MASTER_PORT", nullptr, "MASTER_PORT is not set"},
           {"MASTER_ADDR", "", "MASTER_ADDR=''"},
           {"MASTER_ADDR", nullptr, "MASTER_ADDR is not set"},
       }) {
    EnvMap env = base;
    if (c.value) {
      env[c.name] = c.value;
    } else {
      env.erase(c.name);
    }
    EXPECT_THAT(config_error(env), HasSubstr(c.expect))
        << c.name << "=" << (c.value ? c.value : "(unset)");
  }
}

TEST(DistEnv, SlurmAndOpenMpiErrors) {
  EXPECT_THAT(config_error({{"SLURM_PROCID", "2"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_LOCALID", "0"},
                            {"MASTER_ADDR", "h"}}),
              HasSubstr("SLURM_PROCID='2' must be less than SLURM_NTASKS=2"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}}),
              HasSubstr("SLURM_NTASKS is not set"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "4"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x2"},
                            {"MASTER_ADDR", "h"}}),
              HasSubstr("SLURM_STEP_TASKS_PER_NODE='2(x2'"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "4"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_NODEID", "2"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                            {"MASTER_ADDR", "h"}}),
              HasSubstr("no entry for SLURM_NODEID=2"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}),
              AllOf(HasSubstr("MASTER_ADDR"), HasSubstr("SLURM_LAUNCH_NODE_IPADDR")));
  EXPECT_THAT(config_error({{"OMPI_COMM_WORLD_RANK", "0"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}),
              HasSubstr("OMPI_COMM_WORLD_LOCAL_SIZE is not set"));
  EXPECT_THAT(config_error({{"OMPI_COMM_WORLD_RANK", "0"},
                            {"OMPI_COMM_WORLD_SIZE", "two"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}),
              HasSubstr("OMPI_COMM_WORLD_SIZE='two'"));
}

TEST(DistEnv, ReadsTheProcessEnvironment) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "1234", 1);
  DistEnv d = detect_dist_env();
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(name);
  EXPECT_EQ(d.source, "torchrun");
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.world_size, 2);
  EXPECT_EQ(d.master_port, 1234);
}

TEST(HostPort, Parses) {
  HostPort hp = parse_host_port("node01:29500", "--master");
  EXPECT_EQ(hp.host, "node01");
  EXPECT_EQ(hp.port, 29500);
  hp = parse_host_port("10.0.0.1", "--master");
  EXPECT_EQ(hp.host, "10.0.0.1");
  EXPECT_EQ(hp.port, 0);
  hp = parse_host_port("[::1]:80", "--master");
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.port, 80);
  for (const char* bad :
       {"", ":29500", "h:", "h:0", "h:65536", "h:12a", "::1:80", "[::1", "h:-1", "h:999999"}) {
    try {
      parse_host_port(bad, "--master");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("--master"), HasSubstr("'" + std::string(bad) + "'")));
    }
  }
}

TEST(HostPort, FreePortCanBeBound) {
  int port = pick_free_port();
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

}  // namespace
}  // namespace brigade
