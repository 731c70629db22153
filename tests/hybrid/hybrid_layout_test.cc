// resolve_hybrid_layout: the mesh from [parallel] and the world size, and every refusal naming
// its factors, checked against layouts worked out by hand.
#include "brigade/train/hybrid_layout.h"

#include <gtest/gtest.h>

#include <string>

#include "brigade/base/error.h"
#include "common/layout_gpt.h"

namespace brigade {
namespace {

Config gpt(int64_t tp, int64_t pp) {
  return testing::layout_gpt(tp, pp);
}

std::string error_of(const Config& c, int64_t world) {
  try {
    resolve_hybrid_layout(c, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(HybridLayout, DpFillsTheWorld) {
  const HybridLayout h = resolve_hybrid_layout(gpt(2, 2), 8);
  EXPECT_EQ(h.shape.pp, 2);
  EXPECT_EQ(h.shape.dp, 2);
  EXPECT_EQ(h.shape.tp, 2);
  EXPECT_EQ(h.micro_batches, 4);
  // 4 blocks over 2 stages; the embeddings and the tied head weigh the same at either end.
  EXPECT_EQ(h.stage_bounds, (std::vector<int>{0, 2, 4}));
  EXPECT_TRUE(is_model_parallel(gpt(2, 1)));
  EXPECT_FALSE(is_model_parallel(gpt(1, 1)));
}

TEST(HybridLayout, ExplicitSplitAndInterleaving) {
  Config c = gpt(1, 2);
  c.parallel.schedule = "interleaved";
  c.parallel.virtual_stages = 2;
  c.parallel.layer_split = {1, 1, 1, 1};
  const HybridLayout h = resolve_hybrid_layout(c, 2);
  EXPECT_EQ(h.stage_bounds, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(h.schedule, ScheduleKind::kInterleaved);
}

TEST(HybridLayout, RefusalsPrintEveryFactor) {
  Config c = gpt(2, 2);
  c.parallel.dp = 2;
  std::string e = error_of(c, 6);
  EXPECT_NE(e.find("pp=2 x dp=2 x ep=1 x tp=2 = 8 != world size 6"), std::string::npos) << e;
  // dp = 0 and a world that pp x tp does not divide.
  e = error_of(gpt(2, 2), 6);
  EXPECT_NE(e.find("world size 6"), std::string::npos) << e;
  e = error_of(gpt(3, 1), 3);
  EXPECT_NE(e.find("n_head"), std::string::npos) << e;
  EXPECT_NE(e.find("tp=3"), std::string::npos) << e;
  c = gpt(1, 4);
  c.parallel.schedule = "interleaved";
  c.parallel.virtual_stages = 2;  // 8 stages, 4 blocks
  e = error_of(c, 4);
  EXPECT_NE(e.find("pp=4 x dp=1 x ep=1 x tp=1"), std::string::npos) << e;
  c = gpt(1, 2);
  c.parallel.schedule = "interleaved";
  c.train.grad_accum = 3;  // not a multiple of pp
  EXPECT_NE(error_of(c, 2), "");
  c = gpt(1, 2);
  c.parallel.layer_split = {3, 2};
  EXPECT_NE(error_of(c, 2), "");
  c = gpt(2, 1);
  c.data.seq_len = 8;
  EXPECT_NE(error_of(c, 2).find("data.seq_len"), std::string::npos);
}

TEST(HybridLayout, ConfigRefusesUnsupportedCombinations) {
  // Every replica sync method runs over model-parallel replicas (expert-parallel ones too);
  // parameter servers, federations and a quorum are refused by name.
  Config c = gpt(2, 1);
  for (SyncKind method : {SyncKind::kDiloco, SyncKind::kDemo, SyncKind::kPowerSgd,
                          SyncKind::kSignEf, SyncKind::kTopK}) {
    c.sync.method = method;
    EXPECT_NO_THROW(c.validate()) << method;
  }
  auto refused = [](Config config, const char* key) {
    try {
      config.validate();
      ADD_FAILURE() << key << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  };
  c.sync.method = SyncKind::kPs;
  refused(c, "sync.method");
  c.sync.method = SyncKind::kDiloco;
  c.sync.quorum = 0.5;
  refused(c, "sync.quorum");
  c = gpt(1, 2);
  c.model.n_experts = 4;
  c.parallel.ep = 2;
  c.sync.method = SyncKind::kDiloco;
  EXPECT_NO_THROW(c.validate());
  // ... but not an exchange whose choices span tensors: the ep ranks would drift apart.
  for (SyncKind method : {SyncKind::kTopK, SyncKind::kSignEf}) {
    c.sync.method = method;
    refused(c, "parallel.ep = 2");
  }
  c.sync.method = SyncKind::kDiloco;
  c.sync.payload = "int8";
  refused(c, "parallel.ep = 2");
  c.sync.payload = "auto";
  // ZeRO-1/2 on the dp axis are supported (with ep > 1 too); ZeRO-3 is not.
  c = gpt(1, 2);
  c.parallel.zero = 1;
  EXPECT_NO_THROW(c.validate());
  c.parallel.zero = 2;
  EXPECT_NO_THROW(c.validate());
  c.parallel.zero = 3;
  try {
    c.validate();
    ADD_FAILURE() << "zero = 3 with pp = 2 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.zero"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
  }
  c = gpt(1, 2);
  c.model.n_experts = 4;
  c.parallel.ep = 2;
  EXPECT_NO_THROW(c.validate());
  c.parallel.zero = 1;
  EXPECT_NO_THROW(c.validate());  // dp's ranks hold the same dense tensors and experts
  c.parallel.zero = 2;
  EXPECT_NO_THROW(c.validate());
  c.parallel.zero = 3;
  try {
    c.validate();
    ADD_FAILURE() << "zero = 3 with ep = 2 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.zero"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parallel.ep = 2"), std::string::npos) << e.what();
  }
  c = gpt(2, 2);
  c.parallel.schedule = "pipedream";
  EXPECT_THROW(c.validate(), ConfigError);
  EXPECT_NO_THROW(gpt(2, 2).validate());
}

}  // namespace
}  // namespace brigade
