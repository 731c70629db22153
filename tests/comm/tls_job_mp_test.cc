// comm.transport = "tls" end to end (docs/security.md): `brigade launch` jobs whose collectives
// run over TLS train bitwise like the same jobs over plain TCP (DDP, DiLoCo, pp = 2; fresh keys per
// job and long-term keys of `brigade keygen --kind tls` with an allow-list); a rank holding a
// key that is not on the allow-list stops the job with both ranks naming why, and no key, secret
// or public, reaches the logs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "brigade/base/file_io.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;

class TlsJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("tls-job");
    config_ = dir_ + "/run.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", "12"}, {"train.warmup", "1"}, {"model.n_head", "2"}});
  }
  testing::CommandResult train(const std::string& name, const std::string& extra) {
    return testing::run_brigade(
        "train " + config_ + " --set run.out_dir=" + dir_ + " --set run.name=" + name + " " + extra,
        2, 180);
  }
  std::vector<double> losses(const std::string& name) {
    return testing::train_series(dir_ + "/" + name + "/metrics.jsonl");
  }
  void keygen(const std::string& stem) {
    const auto r = testing::run_brigade("keygen --kind tls --out " + dir_ + "/keys/" + stem);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("(tls)"));
  }
  // Every file the run wrote that a person reads: its logs and metrics.
  std::string logs_of(const std::string& name) {
    std::string all;
    if (!std::filesystem::exists(dir_ + "/" + name)) return all;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/" + name)) {
      const std::string p = e.path().string();
      if (e.is_regular_file() && (p.ends_with(".log") || p.ends_with(".jsonl") ||
                                  p.ends_with(".json") || p.ends_with(".toml"))) {
        all += read_file(p);
      }
    }
    return all;
  }
  std::string dir_, config_;
};

// DDP (the world group), DiLoCo (its replica exchange) and pipeline parallelism (the mesh's
// sub-groups, each with its own TLS rendezvous).
TEST_F(TlsJob, DdpDilocoAndPipelineOverTlsTrainBitwiseLikePlainTcp) {
  const std::pair<std::string, std::string> jobs[] = {
      {"ddp", ""},
      {"diloco", "--set sync.method=diloco --set sync.inner_steps=4"},
      {"pp", "--set parallel.pp=2 --set train.grad_accum=2"}};
  for (const auto& [tag, sync] : jobs) {
    SCOPED_TRACE(tag);
    const auto tcp = train(tag + "-tcp", sync + " --set comm.transport=tcp");
    ASSERT_EQ(tcp.exit_code, 0) << tcp.output;
    const auto tls = train(tag + "-tls", sync + " --set comm.transport=tls");
    ASSERT_EQ(tls.exit_code, 0) << tls.output;
    EXPECT_THAT(tls.output, HasSubstr("collectives: TLS 1.3"));
    EXPECT_THAT(tcp.output, HasSubstr("collectives: plain TCP"));
    ASSERT_EQ(losses(tag + "-tcp").size(), 12u);
    EXPECT_EQ(losses(tag + "-tcp"), losses(tag + "-tls"));
  }
}

TEST_F(TlsJob, LongTermKeysOnTheAllowListTrainAndAStrangerIsRefused) {
  keygen("peer_0");
  keygen("peer_1");
  const std::string keys = " --set comm.transport=tls --set comm.key=" + dir_ +
                           "/keys/peer_{rank}.key --set comm.peer_public=" + dir_ +
                           "/keys/peer_{rank}.pub";
  const auto tcp = train("tcp", "--set comm.transport=tcp");
  ASSERT_EQ(tcp.exit_code, 0) << tcp.output;
  const auto listed = train("listed", keys);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr("from comm.key; 2 keys allowed by comm.peer_public"));
  EXPECT_EQ(losses("listed"), losses("tcp"));

  // Rank 1 now holds a key of its own that nobody listed.
  keygen("stranger");
  std::filesystem::copy_file(dir_ + "/keys/stranger.key", dir_ + "/keys/peer_1.key",
                             std::filesystem::copy_options::overwrite_existing);
  const auto refused = train("refused", keys + " --set comm.timeout_s=20");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("rank 1 presents a key that is not in comm.peer_public"));
  EXPECT_THAT(refused.output, HasSubstr("own key (comm.key) is not in comm.peer_public"));

  std::string all_keys;
  for (const std::string stem : {"peer_0", "peer_1", "stranger"}) {
    all_keys += read_file(dir_ + "/keys/" + stem + ".key");
  }
  for (const std::string run : {"listed", "refused"}) {
    const std::string logs = logs_of(run) + (run == "listed" ? listed.output : refused.output);
    for (size_t at = 0; (at = all_keys.find("public ", at)) != std::string::npos; at += 7) {
      const std::string pub = all_keys.substr(at + 7, 64);
      EXPECT_EQ(logs.find(pub), std::string::npos) << run << " logs a public key";
    }
    for (size_t at = 0; (at = all_keys.find("secret ", at)) != std::string::npos; at += 7) {
      EXPECT_EQ(logs.find(all_keys.substr(at + 7, 64)), std::string::npos)
          << run << " logs a secret";
    }
  }
}

}  // namespace
}  // namespace brigade
