// brigade workers started as torchrun starts them (`torchrun --no-python brigade train ...`):
// each process gets torchrun's whole environment, and with the agent store (torchrun's default
// for a static rendezvous) the agent itself listens on MASTER_PORT. Debian's python3-torch 1.13
// torchrun fails on Python 3.11 in its own code (docs/launching.md), so the test plays the
// agent: it holds MASTER_PORT with a listening socket and starts the two workers with the
// variables torchrun sets. They must train together, the same losses as one process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>

#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::metrics_records;
using testing::run_command;

// A listening socket on a free loopback port, as torchrun's agent store holds MASTER_PORT.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  for (const auto& j : metrics_records(metrics, "train")) out.push_back(j.at("loss"));
  return out;
}

TEST(TorchrunEnv, WorkersStartedAsTorchrunStartsThemTrainTogether) {
  const std::string dir = make_temp_dir("torchrun-env");
  std::ofstream(dir + "/run.toml") << testing::tiny_gpt_config(
      {{"train.steps", "4"}, {"train.warmup", "1"}, {"train.micro_batch", "2"}});
  HeldPort agent_store;
  // brigade's store takes the next port, which is free on loopback unless another test took it
  // in the meantime (the same race every free-port test has).
  const std::string bin = BRIGADE_BINARY;
  auto worker = [&](int rank) {
    return "env LOCAL_RANK=" + std::to_string(rank) + " RANK=" + std::to_string(rank) +
           " GROUP_RANK=0 ROLE_RANK=" + std::to_string(rank) +
           " ROLE_NAME=default LOCAL_WORLD_SIZE=2 WORLD_SIZE=2 GROUP_WORLD_SIZE=1"
           " ROLE_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
           std::to_string(agent_store.port()) +
           " TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0"
           " TORCHELASTIC_RUN_ID=none TORCHELASTIC_USE_AGENT_STORE=True"
           " TORCH_NCCL_ASYNC_ERROR_HANDLING=1 OMP_NUM_THREADS=1 " +
           bin + " train " + dir + "/run.toml --set run.out_dir=" + dir + "/tr";
  };
  const auto r = run_command("sh -c '" + worker(1) + " > " + dir + "/rank1.log 2>&1 & " +
                                 worker(0) + "; rc=$?; wait $!; exit $((rc | $?))'",
                             180);
  std::ifstream rank1(dir + "/rank1.log");
  const std::string rank1_log((std::istreambuf_iterator<char>(rank1)),
                              std::istreambuf_iterator<char>());
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nrank 1:\n" << rank1_log;
  EXPECT_NE(r.output.find("torchrun (agent store"), std::string::npos) << r.output;

  // The same global batch on one process.
  const auto one = run_command(bin + " train " + dir + "/run.toml --set run.out_dir=" + dir +
                                   "/one --set train.micro_batch=4",
                               120);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = losses(dir + "/tr/tiny/metrics.jsonl"),
             ref = losses(dir + "/one/tiny/metrics.jsonl");
  ASSERT_EQ(two.size(), 4u);
  ASSERT_EQ(ref.size(), 4u);
  for (size_t i = 0; i < two.size(); ++i) EXPECT_NEAR(two[i], ref[i], 1e-5 * ref[i]) << i;
}

}  // namespace
}  // namespace brigade
