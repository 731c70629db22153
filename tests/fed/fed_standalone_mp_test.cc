// A federation started by hand, one process per role and no launcher between them:
// `brigade fed-server` and two `brigade fed-client --client K`, each with its long-term key
// from `brigade keygen`. It ends bitwise where the same federation under `brigade launch` ends
// (same data, seed and strategy: the roles and the arithmetic are the same, only how the
// processes find each other differs). Missing keys are refused by name before anything starts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "brigade/fed/state_file.h"
#include "common/run_command.h"
#include "fed/fed_test_util.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

constexpr int kClients = 2;

// A loopback port nothing listens on now (the kernel's pick for an ephemeral bind).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

class StandaloneFederation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("fedhand");
    testing::write_tiny_federation(dir_, kClients);
    for (const std::string name : {"coordinator", "client_0", "client_1"}) {
      const auto r =
          run_command(std::string(BRIGADE_BINARY) + " keygen --out " + dir_ + "/keys/" + name, 30);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }

  std::string write_config(const std::string& name, const std::string& fed_extra) {
    const std::string path = dir_ + "/" + name + ".toml";
    std::ofstream(path) << testing::tiny_fed_config(
        dir_, "strategy = \"scaffold\"\nlocal_steps = 2\n" + fed_extra);
    return path;
  }

  std::vector<float> params(const std::string& name) const {
    return read_state_file(dir_ + "/" + name + "/fed/fed/coordinator.state")
        .tensor("params", testing::tiny_model(1)->num_params(), name);
  }

  std::string dir_;
};

TEST_F(StandaloneFederation, FedServerAndClientsStartedByHandEndWhereTheLaunchedFederationEnds) {
  const int port = unused_port();
  ASSERT_GT(port, 0);
  const std::string keys = dir_ + "/keys/";
  const std::string address = "\"127.0.0.1:" + std::to_string(port) + "\"\n";
  // Each party's own config, as on separate hosts: the coordinator lists the clients' public
  // keys and holds its secret; a client holds its secret and pins the coordinator's public key.
  const std::string server = write_config(
      "server", "clients = 2\nbind = " + address + "coordinator_key = \"" + keys +
                    "coordinator.key\"\nclient_public = \"" + keys + "client_{client}.pub\"\n");
  const std::string client = write_config(
      "client", "clients = 2\ncoordinator = " + address + "coordinator_public = \"" + keys +
                    "coordinator.pub\"\nclient_key = \"" + keys + "client_{client}.key\"\n");
  const std::string bin = BRIGADE_BINARY;
  const std::string out = " --set run.out_dir=" + dir_ + "/hand";
  // Clients first: ZeroMQ connects whenever the coordinator binds.
  const std::string cmd = "bash -c '" + bin + " fed-client " + client + " --client 0" + out +
                          " & a=$!; " + bin + " fed-client " + client + " --client 1" + out +
                          " & b=$!; " + bin + " fed-server " + server + out +
                          "; s=$?; wait $a; ca=$?; wait $b; cb=$?; echo exits $s $ca $cb; " +
                          "test $s -eq 0 -a $ca -eq 0 -a $cb -eq 0'";
  const auto r = run_command(cmd, 240);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;

  const std::string launched = write_config("launched", "");
  const auto l = run_command(
      bin + " launch --nproc 3 -- train " + launched + " --set run.out_dir=" + dir_ + "/launched",
      240);
  ASSERT_EQ(l.exit_code, 0) << l.output;
  EXPECT_EQ(params("hand"), params("launched"));
  // Each client kept its state in the run folder it was given, as a launched rank does.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/hand/fed/fed/client_1.state"));
}

TEST_F(StandaloneFederation, MissingKeysAreRefusedByName) {
  const std::string bare = write_config("bare", "clients = 2\n");
  const std::string bin = BRIGADE_BINARY;
  auto r = run_command(bin + " fed-server " + bare, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("fed.coordinator_key = \"\": `brigade fed-server` needs it"),
            std::string::npos)
      << r.output;
  r = run_command(bin + " fed-client " + bare + " --client 0", 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("fed.client_key = \"\": `brigade fed-client` needs it"),
            std::string::npos)
      << r.output;
  r = run_command(bin + " fed-client " + bare + " --client 5 --set fed.client_key=k" +
                      " --set fed.coordinator_public=p --set fed.coordinator=127.0.0.1:1",
                  30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--client 5: fed.clients = 2"), std::string::npos) << r.output;
  // Under `brigade launch` the clients are the job's ranks.
  r = run_command(bin + " launch --nproc 4 -- train " + bare, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("fed.clients = 2: the job has 4 process(es)"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace brigade
