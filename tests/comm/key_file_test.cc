// Key files of `brigade keygen` (comm/key_file.h): written with the right modes and read back
// as written; refused when they would be overwritten, readable by others, mismatched, malformed
// or oversized, each with the config key and the file named, never the key.
#include "brigade/comm/key_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(KeyFile, APairIsWrittenWithItsModesAndReadBack) {
  const std::string dir = testing::make_temp_dir("keys");
  const std::string pub = write_new_key_pair(dir + "/alice");
  EXPECT_EQ(mode_of(dir + "/alice.key"), 0600u);
  EXPECT_EQ(mode_of(dir + "/alice.pub"), 0644u);
  const CurveKeyPair pair = read_secret_key_file(dir + "/alice.key", "fed.client_key");
  EXPECT_EQ(pair.public_key, pub);
  EXPECT_EQ(read_public_key_file(dir + "/alice.pub", "fed.client_public"), pub);
  EXPECT_EQ(pair.secret_key.size(), 40u);
  EXPECT_NE(pair.secret_key, pub);
  EXPECT_NE(write_new_key_pair(dir + "/bob"), pub);  // fresh keys every time
}

TEST(KeyFile, AnExistingKeyIsNeverReplaced) {
  const std::string dir = testing::make_temp_dir("keys");
  write_new_key_pair(dir + "/k");
  const std::string before = read_file(dir + "/k.key");
  EXPECT_THAT(error_of([&] { write_new_key_pair(dir + "/k"); }), HasSubstr("never replaces"));
  EXPECT_EQ(read_file(dir + "/k.key"), before);
}

TEST(KeyFile, BadFilesAreRefusedNamingTheKeyAndTheFileButNotTheSecret) {
  const std::string dir = testing::make_temp_dir("keys");
  write_new_key_pair(dir + "/a");
  write_new_key_pair(dir + "/b");
  const std::string secret = read_secret_key_file(dir + "/a.key", "k").secret_key;

  ::chmod((dir + "/a.key").c_str(), 0644);
  const std::string open =
      error_of([&] { read_secret_key_file(dir + "/a.key", "fed.client_key"); });
  EXPECT_THAT(open, HasSubstr("fed.client_key"));
  EXPECT_THAT(open, HasSubstr("chmod 600"));
  EXPECT_THAT(open, Not(HasSubstr(secret)));
  ::chmod((dir + "/a.key").c_str(), 0600);

  // a's secret with b's public key.
  const std::string a = read_file(dir + "/a.key"), b = read_file(dir + "/b.key");
  const std::string mixed = b.substr(0, b.find("\nsecret ")) + a.substr(a.find("\nsecret "));
  write_file_atomic(dir + "/mixed.key", mixed, 0600);
  EXPECT_THAT(error_of([&] { read_secret_key_file(dir + "/mixed.key", "k"); }),
              HasSubstr("does not belong"));

  write_file_atomic(dir + "/short.key", "brigade-curve-secret-key-v1\npublic abc\n", 0600);
  EXPECT_THAT(error_of([&] { read_secret_key_file(dir + "/short.key", "k"); }),
              HasSubstr("not a secret key file"));
  write_file_atomic(dir + "/big.pub", std::string(8192, 'x'), 0644);
  EXPECT_THAT(error_of([&] { read_public_key_file(dir + "/big.pub", "k"); }), HasSubstr("big.pub"));
  EXPECT_THAT(error_of([&] { read_public_key_file(dir + "/a.key", "k"); }),
              HasSubstr("not a public key file"));
  EXPECT_THAT(error_of([&] { read_public_key_file(dir + "/none.pub", "fed.client_public"); }),
              HasSubstr("brigade keygen"));
}

TEST(KeyFile, TlsPairsAreEd25519KeysReadBackAsTheirIdentity) {
  const std::string dir = testing::make_temp_dir("keys");
  const std::string pub = write_new_key_pair(dir + "/nested/peer", KeyKind::kTls);
  EXPECT_EQ(mode_of(dir + "/nested"), 0700u);  // keygen made the folder, private
  EXPECT_EQ(mode_of(dir + "/nested/peer.key"), 0600u);
  EXPECT_EQ(pub.size(), 64u);
  const PeerIdentity id = read_tls_secret_key_file(dir + "/nested/peer.key", "comm.key");
  EXPECT_EQ(key_to_hex(id.public_key), pub);
  EXPECT_EQ(read_tls_public_key_file(dir + "/nested/peer.pub", "comm.peer_public"), id.public_key);
  // The identity of the seed is the one written: libsodium derives the same public key.
  EXPECT_EQ(PeerIdentity::from_seed(id.seed)->public_key, id.public_key);
  EXPECT_FALSE(PeerIdentity::from_seed("short").has_value());

  // The kinds do not mix, either way.
  write_new_key_pair(dir + "/curve");
  EXPECT_THAT(error_of([&] { read_tls_secret_key_file(dir + "/curve.key", "comm.key"); }),
              HasSubstr("--kind tls"));
  EXPECT_THAT(
      error_of([&] { read_public_key_file(dir + "/nested/peer.pub", "fed.client_public"); }),
      HasSubstr("not a public key file"));
  ::chmod((dir + "/nested/peer.key").c_str(), 0640);
  const std::string open =
      error_of([&] { read_tls_secret_key_file(dir + "/nested/peer.key", "comm.key"); });
  EXPECT_THAT(open, HasSubstr("chmod 600"));
  EXPECT_THAT(open, Not(HasSubstr(key_to_hex(id.seed))));
}

}  // namespace
}  // namespace brigade
