// The [fed] keys of robust aggregation, differential privacy and attacks are refused with the
// key, the value and what is allowed, before any process starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config_error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

using testing::config_error_of;

TEST(FedTrustConfig, BadValuesNameTheKey) {
  EXPECT_THAT(config_error_of({"fed.aggregator=\"mode\""}), HasSubstr("fed.aggregator"));
  EXPECT_THAT(config_error_of({"fed.trim_fraction=0.5"}), HasSubstr("fed.trim_fraction"));
  EXPECT_THAT(config_error_of({"fed.dp_noise=1.0"}), HasSubstr("needs fed.dp_clip > 0"));
  EXPECT_THAT(config_error_of({"fed.dp_clip=1.0", "fed.dp_delta=0.0"}), HasSubstr("fed.dp_delta"));
  EXPECT_THAT(config_error_of({"fed.attack=\"poison\""}), HasSubstr("fed.attack"));
  EXPECT_THAT(config_error_of({"fed.attack=\"scale\""}), HasSubstr("fed.attackers"));
  EXPECT_THAT(config_error_of({"fed.attackers=2"}), HasSubstr("applies with fed.attack"));
  EXPECT_THAT(config_error_of({"fed.krum_select=2"}), HasSubstr("multi_krum"));
  EXPECT_EQ(
      config_error_of({"fed.aggregator=\"median\"", "fed.attack=\"sign_flip\"", "fed.attackers=1"}),
      "");
}

TEST(FedTrustConfig, RulesThatCannotHoldAreRefused) {
  EXPECT_THAT(config_error_of({"fed.aggregator=\"krum\"", "fed.byzantine=2", "fed.min_clients=6"}),
              HasSubstr("set fed.min_clients to at least 7"));
  EXPECT_EQ(config_error_of({"fed.aggregator=\"krum\"", "fed.byzantine=2", "fed.min_clients=7"}),
            "");
  EXPECT_THAT(config_error_of({"fed.aggregator=\"median\"", "fed.strategy=\"scaffold\""}),
              HasSubstr("SCAFFOLD"));
  EXPECT_THAT(config_error_of({"fed.dp_clip=1.0", "fed.aggregator=\"median\""}),
              HasSubstr("use \"mean\""));
  EXPECT_THAT(config_error_of({"fed.dp_clip=1.0", "fed.strategy=\"scaffold\""}),
              HasSubstr("SCAFFOLD"));
}

TEST(FedTrustConfig, KeysAndSecureAggregationRulesAreChecked) {
  EXPECT_THAT(config_error_of({"fed.client_key=\"k/c_{client}.key\""}), HasSubstr("go together"));
  EXPECT_THAT(config_error_of({"fed.coordinator_public=\"k/c.pub\""}),
              HasSubstr("needs fed.coordinator_key"));
  EXPECT_THAT(config_error_of({"fed.secure_aggregation=true", "fed.aggregator=\"median\""}),
              HasSubstr("secure aggregation hides"));
  EXPECT_THAT(config_error_of({"fed.secure_aggregation=true"}), HasSubstr("at least 2"));
  EXPECT_THAT(config_error_of(
                  {"fed.secure_aggregation=true", "fed.min_clients=2", "fed.secagg_threshold=3"}),
              HasSubstr("at most fed.min_clients"));
  EXPECT_THAT(config_error_of({"fed.secagg_threshold=1"}), HasSubstr("one share reveals"));
  EXPECT_THAT(config_error_of({"fed.secure_aggregation=true", "fed.min_clients=2",
                               "fed.dp_clip=1.0", "fed.dp_noise=1.0"}),
              HasSubstr("fed.secagg_clip"));
  EXPECT_EQ(config_error_of({"fed.secure_aggregation=true", "fed.min_clients=2", "fed.dp_clip=1.0",
                             "fed.dp_noise=1.0", "fed.secagg_clip=3.0"}),
            "");
}

}  // namespace
}  // namespace brigade
