// comm.transport, comm.key and comm.peer_public (runtime/process_group.h): each bad value is
// refused naming its key; "auto" is TLS exactly when comm.host leaves the machine; key files of
// the wrong kind, or missing, are refused naming the key and the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "brigade/base/error.h"
#include "brigade/comm/key_file.h"
#include "brigade/runtime/process_group.h"
#include "common/config_error.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using testing::config_error_of;
using ::testing::HasSubstr;

TEST(TransportConfig, BadValuesAreRefusedNamingTheKey) {
  EXPECT_EQ(config_error_of({"comm.transport=\"tls\""}), "");
  EXPECT_THAT(config_error_of({"comm.transport=\"ssl\""}),
              HasSubstr("comm.transport = \"ssl\": allowed values are"));
  EXPECT_THAT(config_error_of({"comm.transport=\"tcp\"", "comm.key=\"k_{rank}.key\""}),
              HasSubstr("comm.key = \"k_{rank}.key\": is for comm.transport = \"tls\""));
  EXPECT_THAT(config_error_of({"comm.key=\"k.key\"", "comm.peer_public=\"keys/all.pub\""}),
              HasSubstr("comm.peer_public = \"keys/all.pub\": must name each rank's .pub file"));
  EXPECT_THAT(config_error_of({"comm.peer_public=\"p_{rank}.pub\""}), HasSubstr("needs comm.key"));
}

TEST(TransportConfig, AutoIsTlsExactlyWhenTheHostLeavesTheMachine) {
  DistEnv env;
  env.rank = 0;
  env.world_size = 2;
  const std::pair<const char*, bool> hosts[] = {
      {"127.0.0.1", false},     {"127.0.0.3", false},     {"localhost", false},
      {"::1", false},           {"10.0.0.5", true},       {"192.168.1.2", true},
      {"node-3.cluster", true}, {"::ffff:10.0.0.1", true}};
  for (const auto& [host, leaves] : hosts) {
    CommConfig comm;
    comm.host = host;
    EXPECT_EQ(peer_security(comm, env) != nullptr, leaves) << host << " under auto";
    comm.transport = leaves ? "tcp" : "tls";  // an explicit choice wins either way
    EXPECT_EQ(peer_security(comm, env) != nullptr, !leaves) << host << " under " << comm.transport;
  }
}

TEST(TransportConfig, KeysAreReadPerRankAndTheAllowListForEveryRank) {
  const std::string dir = testing::make_temp_dir("transport-keys");
  const std::string p0 = write_new_key_pair(dir + "/peer_0", KeyKind::kTls);
  const std::string p1 = write_new_key_pair(dir + "/peer_1", KeyKind::kTls);
  CommConfig comm;
  comm.transport = "tls";
  comm.key = dir + "/peer_{rank}.key";
  comm.peer_public = dir + "/peer_{rank}.pub";
  DistEnv env;
  env.rank = 1;
  env.world_size = 2;
  auto s = peer_security(comm, env);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(key_to_hex(s->identity.public_key), p1);
  ASSERT_EQ(s->allowed.size(), 2u);
  EXPECT_EQ(key_to_hex(s->allowed[0]), p0);
  EXPECT_TRUE(s->allows(s->identity.public_key));
  EXPECT_FALSE(s->allows(PeerIdentity::generate().public_key));

  env.world_size = 3;  // peer_2.pub does not exist
  try {
    peer_security(comm, env);
    ADD_FAILURE() << "a missing allow-list file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("comm.peer_public = \"" + dir + "/peer_2.pub\""));
    EXPECT_THAT(e.what(), HasSubstr("--kind tls"));
  }
  // A CURVE key where a TLS key belongs.
  write_new_key_pair(dir + "/curve_1", KeyKind::kCurve);
  comm.key = dir + "/curve_{rank}.key";
  comm.peer_public = "";
  env.world_size = 2;
  try {
    peer_security(comm, env);
    ADD_FAILURE() << "a curve key was accepted as a TLS key";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a secret key file of `brigade keygen --kind tls`"));
  }
}

}  // namespace
}  // namespace brigade
