// The [sync] section: parsing, defaults, the resolved TOML, and every rejection naming the key,
// the value and what is allowed; `brigade check-config` refuses a bad combination with exit
// code 2 before any process starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"
#include "common/config_error.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::config_error_of;

TEST(SyncConfig, DefaultIsDdpAndEveryMethodIsValid) {
  Config c = parse_config("", "t");
  EXPECT_EQ(c.sync.method, SyncKind::kDdp);
  EXPECT_EQ(c.sync.payload, "auto");
  EXPECT_EQ(c.sync.outer_lr, 0.7);
  EXPECT_EQ(c.sync.outer_momentum, 0.9);
  EXPECT_TRUE(c.sync.nesterov);
  for (const char* m : {"ddp", "diloco", "demo", "powersgd", "signef", "topk"}) {
    EXPECT_EQ(config_error_of({std::string("sync.method=") + m}), "") << m;
  }
}

TEST(SyncConfig, ReadsEveryKeyAndWritesItBack) {
  const char* text =
      "[sync]\nmethod = \"diloco\"\npayload = \"int8\"\ninner_steps = 100\nouter_lr = 0.5\n"
      "outer_momentum = 0.8\nnesterov = false\nfragments = 4\nint8_chunk = 1024\n"
      "demo_beta = 0.99\ndemo_k = 16\ndemo_max_chunk = 32\npowersgd_rank = 2\n"
      "topk_fraction = 0.01\ntopk_k = 7\n";
  Config c = parse_config(text, "t");
  EXPECT_EQ(c.sync.inner_steps, 100);
  EXPECT_EQ(c.sync.fragments, 4);
  EXPECT_FALSE(c.sync.nesterov);
  EXPECT_EQ(c.sync.demo_k, 16);
  EXPECT_EQ(c.sync.topk_k, 7);
  Config back = parse_config(c.to_toml(), "resolved");
  EXPECT_EQ(back.to_toml(), c.to_toml());
  EXPECT_THAT(c.to_toml(), HasSubstr("[sync]\nmethod = \"diloco\"\npayload = \"int8\"\n"));
}

TEST(SyncConfig, RejectsUnknownKeysAndValues) {
  EXPECT_THAT(config_error_of({"sync.inner_step=3"}), HasSubstr("unknown key sync.inner_step"));
  // Named choices are parsed once, as the config is read: the value, where it came from, every
  // allowed name, and the nearest one for a typo.
  EXPECT_THAT(config_error_of({"sync.method=allreduce"}),
              AllOf(HasSubstr("sync.method = \"allreduce\" in --set sync.method=allreduce"),
                    HasSubstr("allowed values are \"ddp\", \"diloco\", \"demo\", \"powersgd\", "
                              "\"signef\", \"topk\", \"ps\", \"fed\""),
                    Not(HasSubstr("did you mean"))));
  EXPECT_THAT(config_error_of({"sync.method=dilco"}), HasSubstr("(did you mean \"diloco\"?)"));
  EXPECT_THAT(config_error_of({"model.kind=gtp"}),
              AllOf(HasSubstr("allowed values are \"gpt\", \"mlp\", \"cnn\""),
                    HasSubstr("(did you mean \"gpt\"?)")));
  EXPECT_THAT(config_error_of({"sync.method=[1]"}),
              HasSubstr("expected one of \"ddp\", \"diloco\""));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.inner_steps=0"}),
              HasSubstr("sync.inner_steps = 0: must be in [1,"));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.outer_momentum=1.0"}),
              HasSubstr("sync.outer_momentum = 1: must be in [0,"));
  EXPECT_THAT(config_error_of({"sync.outer_lr=0"}), HasSubstr("sync.outer_lr = 0: must be in (0,"));
  EXPECT_THAT(config_error_of({"sync.demo_max_chunk=65"}), HasSubstr("sync.demo_max_chunk = 65"));
  EXPECT_THAT(config_error_of({"sync.demo_beta=1.0"}), HasSubstr("sync.demo_beta = 1"));
  EXPECT_THAT(config_error_of({"sync.topk_fraction=0"}), HasSubstr("sync.topk_fraction = 0"));
  EXPECT_THAT(config_error_of({"sync.powersgd_rank=0"}), HasSubstr("sync.powersgd_rank = 0"));
}

TEST(SyncConfig, PayloadMustSuitTheMethod) {
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.payload=int8"}), "");
  EXPECT_EQ(
      config_error_of({"sync.method=diloco", "sync.payload=dct_topk", "sync.dct_values=1bit"}), "");
  EXPECT_THAT(config_error_of({"sync.method=demo", "sync.payload=dct_topk"}),
              HasSubstr("sync.payload = \"dct_topk\": allowed values with sync.method = \"demo\""));
  EXPECT_THAT(
      config_error_of({"sync.method=diloco", "sync.payload=dct_topk", "sync.dct_values=int8"}),
      HasSubstr("sync.dct_values = \"int8\": allowed values are \"f32\", \"bf16\", "
                "\"1bit\""));
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.payload=1bit"}), "");
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.payload=powersgd_bf16"}), "");
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.payload=powersgd", "sync.quorum=0.5"}),
              HasSubstr("sync.quorum = 0.5: sync.payload = \"powersgd\" compresses the replicas' "
                        "mean with collectives and cannot leave replicas out"));
  EXPECT_THAT(config_error_of({"sync.residual_decay=0"}),
              HasSubstr("sync.residual_decay = 0: must be in (0, 1]"));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.payload=1bit", "sync.sign_block=4"}),
              HasSubstr("sync.sign_block = 4: must be in [8, 1073741824]"));
  EXPECT_THAT(config_error_of({"sync.method=powersgd", "sync.payload=1bit"}),
              HasSubstr("allowed values with sync.method = \"powersgd\" are \"auto\", \"f32\""));
  EXPECT_THAT(config_error_of({"sync.dct_k=0"}), HasSubstr("sync.dct_k = 0: must be in [1, 4096]"));
  EXPECT_THAT(config_error_of({"sync.dct_chunk=65"}),
              HasSubstr("sync.dct_chunk = 65: must be in [1, 64]"));
  EXPECT_EQ(config_error_of({"sync.method=demo", "sync.payload=1bit"}), "");
  EXPECT_EQ(config_error_of({"sync.method=topk", "sync.payload=bf16"}), "");
  EXPECT_THAT(config_error_of({"sync.method=demo", "sync.payload=int8"}),
              HasSubstr("sync.payload = \"int8\": allowed values with sync.method = \"demo\" are "
                        "\"auto\", \"f32\", \"bf16\", \"1bit\""));
  EXPECT_THAT(config_error_of({"sync.method=powersgd", "sync.payload=bf16"}),
              HasSubstr("sync.payload = \"bf16\": allowed values with sync.method = \"powersgd\""));
  EXPECT_THAT(config_error_of({"sync.method=signef", "sync.payload=f32"}),
              HasSubstr("with sync.method = \"signef\" are \"auto\", \"1bit\""));
  EXPECT_THAT(
      config_error_of({"sync.payload=int8"}),
      HasSubstr("allowed values with sync.method = \"ddp\" are \"auto\", \"f32\", \"bf16\""));
}

TEST(SyncConfig, RejectsInvalidCombinations) {
  EXPECT_THAT(config_error_of({"sync.method=diloco", "parallel.zero=1"}),
              HasSubstr("parallel.zero = 1: must be 0 with sync.method = \"diloco\""));
  EXPECT_EQ(config_error_of({"sync.method=ddp", "parallel.zero=2"}), "");
  EXPECT_THAT(
      config_error_of({"sync.method=demo", "parallel.grad_wire=bf16"}),
      HasSubstr("parallel.grad_wire = \"bf16\": must be \"f32\" with sync.method = \"demo\""));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.inner_steps=4", "sync.fragments=5"}),
              HasSubstr("sync.fragments = 5: must be in [1, 4]"));
  EXPECT_THAT(config_error_of({"sync.payload=f32", "parallel.grad_wire=bf16"}),
              HasSubstr("sync.payload = \"f32\": contradicts parallel.grad_wire = \"bf16\""));
  EXPECT_EQ(config_error_of({"sync.payload=bf16", "parallel.grad_wire=bf16"}), "");
}

// Peers come and go: quorum only for DiLoCo, and rank 0's wait for a quorum must end before the
// others give up waiting for its decision.
TEST(SyncConfig, QuorumKeys) {
  Config c = parse_config("", "t");
  EXPECT_EQ(c.sync.quorum, 1.0);
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.quorum=0.75"}), "");
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.quorum=0.5", "sync.outer_deadline_s=5",
                             "sync.quorum_retries=3"}),
            "");
  EXPECT_THAT(config_error_of({"sync.method=demo", "sync.quorum=0.5"}),
              HasSubstr("sync.quorum = 0.5: only sync.method = \"diloco\""));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.quorum=0"}),
              HasSubstr("sync.quorum = 0: must be in (0, 1]"));
  EXPECT_THAT(
      config_error_of({"sync.method=diloco", "sync.quorum=0.5", "sync.outer_deadline_s=40"}),
      HasSubstr("= 80 s for a quorum, which must stay below comm.timeout_s = 60"));
  EXPECT_THAT(config_error_of({"sync.quorum_retries=-1"}), HasSubstr("sync.quorum_retries = -1"));
  Config q =
      parse_config("[sync]\nmethod = \"diloco\"\nquorum = 0.75\nouter_deadline_s = 2.5\n", "t");
  EXPECT_EQ(parse_config(q.to_toml(), "resolved").sync.outer_deadline_s, 2.5);
  EXPECT_EQ(parse_config(q.to_toml(), "resolved").sync.quorum, 0.75);
}

// Robust outer steps: only where the outer step sees each replica's pseudo-gradient.
TEST(SyncConfig, OuterAggregatorKeys) {
  EXPECT_EQ(config_error_of({"sync.method=diloco", "sync.quorum=0.75",
                             "sync.outer_aggregator=\"median\"", "sync.outer_norm_bound=2.0"}),
            "");
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.outer_aggregator=\"median\""}),
              HasSubstr("applies to diloco with sync.quorum < 1"));
  EXPECT_THAT(config_error_of({"sync.method=diloco", "sync.outer_norm_bound=1.0"}),
              HasSubstr("sync.outer_norm_bound"));
  EXPECT_THAT(config_error_of({"sync.outer_aggregator=\"mode\""}),
              HasSubstr("sync.outer_aggregator"));
  EXPECT_THAT(config_error_of({"sync.outer_trim_fraction=0.5"}),
              HasSubstr("sync.outer_trim_fraction"));
}

// The CLI validates before any work: exit code 2 and the message on stderr.
TEST(SyncConfig, CheckConfigRefusesABadCombination) {
  std::string dir = testing::make_temp_dir("sync-config");
  std::ofstream(dir + "/c.toml") << "[sync]\nmethod = \"demo\"\n[parallel]\nzero = 2\n";
  auto r =
      testing::run_command(std::string(BRIGADE_BINARY) + " check-config " + dir + "/c.toml", 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("parallel.zero = 2: must be 0 with sync.method = \"demo\""));
  auto ok = testing::run_command(
      std::string(BRIGADE_BINARY) + " check-config " + dir + "/c.toml --set parallel.zero=0", 60);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("method = \"demo\""));
}

// `brigade launch` validates a train worker's config before it starts any worker: exit code 2,
// the message, and no run folder.
TEST(SyncConfig, LaunchRefusesABadConfigBeforeStartingWorkers) {
  std::string dir = testing::make_temp_dir("sync-launch");
  std::ofstream(dir + "/c.toml") << "[sync]\nmethod = \"diloco\"\npayload = \"bf16\"\n";
  auto r = testing::run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + dir +
                                    "/c.toml --set run.out_dir=" + dir + "/runs",
                                60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sync.payload = \"bf16\": allowed values with sync.method = "
                                  "\"diloco\" are \"auto\", \"f32\", \"int8\""));
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << "a worker started:\n" << r.output;
  EXPECT_FALSE(std::ifstream(dir + "/runs/default/config.toml").good());
}

}  // namespace
}  // namespace brigade
