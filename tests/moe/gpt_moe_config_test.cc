// The model.* mixture-of-experts keys: parsed, written back in the resolved TOML, and every
// invalid value rejected with a message naming the key and what is allowed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"
#include "brigade/train/model_factory.h"
#include "common/config_error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

using testing::config_error_of;

const std::vector<std::string> kMoe = {"model.n_experts=4"};

std::vector<std::string> moe_with(const std::string& extra) {
  auto v = kMoe;
  v.push_back(extra);
  return v;
}

TEST(GptMoeConfig, DefaultsAreDenseAndMoeKeysRoundTrip) {
  const Config d = parse_config("", "t");
  EXPECT_EQ(d.model.n_experts, 0);
  EXPECT_EQ(d.model.moe_top_k, 1);
  EXPECT_DOUBLE_EQ(d.model.aux_loss_coef, 0.01);
  EXPECT_EQ(d.model.moe_every, 1);
  const Config c =
      parse_config("", "t",
                   {"model.n_experts=8", "model.moe_top_k=2", "model.capacity_factor=1.0",
                    "model.aux_loss_coef=0.02", "model.moe_every=2"});
  EXPECT_EQ(config_error_of({"model.n_experts=8", "model.moe_top_k=2", "model.moe_every=2"}), "");
  const Config back = parse_config(c.to_toml(), "resolved");
  EXPECT_EQ(back.model.n_experts, 8);
  EXPECT_EQ(back.model.moe_top_k, 2);
  EXPECT_DOUBLE_EQ(back.model.capacity_factor, 1.0);
  EXPECT_DOUBLE_EQ(back.model.aux_loss_coef, 0.02);
  EXPECT_EQ(back.model.moe_every, 2);
}

TEST(GptMoeConfig, EveryInvalidValueNamesItsKey) {
  EXPECT_THAT(config_error_of({"model.n_experts=-1"}), HasSubstr("model.n_experts = -1"));
  EXPECT_THAT(config_error_of(moe_with("model.moe_top_k=3")),
              HasSubstr("model.moe_top_k = 3: allowed values are 1, 2"));
  EXPECT_THAT(config_error_of(moe_with("model.moe_top_k=0")), HasSubstr("model.moe_top_k = 0"));
  EXPECT_THAT(config_error_of({"model.n_experts=1", "model.moe_top_k=2"}),
              HasSubstr("must be at most model.n_experts = 1"));
  EXPECT_THAT(config_error_of(moe_with("model.capacity_factor=inf")),
              HasSubstr("model.capacity_factor"));
  EXPECT_THAT(config_error_of(moe_with("model.aux_loss_coef=-0.5")),
              HasSubstr("model.aux_loss_coef"));
  EXPECT_THAT(config_error_of(moe_with("model.moe_every=0")), HasSubstr("model.moe_every = 0"));
  EXPECT_THAT(config_error_of(moe_with("model.moe_every=5")),  // default n_layer = 4
              HasSubstr("model.moe_every = 5: must be in [1, 4]"));
  EXPECT_THAT(
      config_error_of({"model.kind=\"mlp\"", "data.source=\"fashion_mnist\"", "model.n_experts=4"}),
      HasSubstr("model.kind = \"gpt\""));
  EXPECT_THAT(config_error_of(moe_with("parallel.tp=2")), HasSubstr("parallel.tp = 2"));
  // Pipeline and expert parallelism take MoE blocks; ep must divide the experts and needs them.
  EXPECT_EQ(config_error_of(moe_with("parallel.pp=2")), "");
  EXPECT_EQ(config_error_of(moe_with("parallel.ep=2")), "");
  EXPECT_THAT(config_error_of(moe_with("parallel.ep=3")),
              HasSubstr("parallel.ep = 3: must divide model.n_experts"));
  EXPECT_THAT(config_error_of({"parallel.ep=2"}), HasSubstr("parallel.ep = 2: must be 1 without"));
  EXPECT_THAT(config_error_of(moe_with("parallel.ep=0")), HasSubstr("parallel.ep"));
  // Dropless and a zero coefficient are allowed.
  EXPECT_EQ(config_error_of(moe_with("model.capacity_factor=0")), "");
  EXPECT_EQ(config_error_of(moe_with("model.aux_loss_coef=0")), "");
}

TEST(GptMoeConfig, TheFactoryBuildsTheMoeModel) {
  const Config c = parse_config("", "t",
                                {"model.n_experts=4", "model.moe_every=2", "model.seq_len=8",
                                 "model.d_model=16", "model.n_layer=2"});
  const auto model = make_model(c.model, 1);
  EXPECT_NO_THROW(model->layout().at("h.1.mlp.experts.3.c_fc.weight"));
  EXPECT_NO_THROW(model->layout().at("h.0.mlp.c_fc.weight"));
}

}  // namespace
}  // namespace brigade
