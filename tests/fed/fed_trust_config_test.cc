// The [fed] keys of robust aggregation, differential privacy and attacks are refused with the
// key, the value and what is allowed, before any process starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    parse_config("", "test.toml", overrides).validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(FedTrustConfig, BadValuesNameTheKey) {
  EXPECT_THAT(error_of({"fed.aggregator=\"mode\""}), HasSubstr("fed.aggregator"));
  EXPECT_THAT(error_of({"fed.trim_fraction=0.5"}), HasSubstr("fed.trim_fraction"));
  EXPECT_THAT(error_of({"fed.dp_noise=1.0"}), HasSubstr("needs fed.dp_clip > 0"));
  EXPECT_THAT(error_of({"fed.dp_clip=1.0", "fed.dp_delta=0.0"}), HasSubstr("fed.dp_delta"));
  EXPECT_THAT(error_of({"fed.attack=\"poison\""}), HasSubstr("fed.attack"));
  EXPECT_THAT(error_of({"fed.attack=\"scale\""}), HasSubstr("fed.attackers"));
  EXPECT_THAT(error_of({"fed.attackers=2"}), HasSubstr("applies with fed.attack"));
  EXPECT_THAT(error_of({"fed.krum_select=2"}), HasSubstr("multi_krum"));
  EXPECT_EQ(error_of({"fed.aggregator=\"median\"", "fed.attack=\"sign_flip\"", "fed.attackers=1"}),
            "");
}

TEST(FedTrustConfig, RulesThatCannotHoldAreRefused) {
  EXPECT_THAT(error_of({"fed.aggregator=\"krum\"", "fed.byzantine=2", "fed.min_clients=6"}),
              HasSubstr("set fed.min_clients to at least 7"));
  EXPECT_EQ(error_of({"fed.aggregator=\"krum\"", "fed.byzantine=2", "fed.min_clients=7"}), "");
  EXPECT_THAT(error_of({"fed.aggregator=\"median\"", "fed.strategy=\"scaffold\""}),
              HasSubstr("SCAFFOLD"));
  EXPECT_THAT(error_of({"fed.dp_clip=1.0", "fed.aggregator=\"median\""}),
              HasSubstr("use \"mean\""));
  EXPECT_THAT(error_of({"fed.dp_clip=1.0", "fed.strategy=\"scaffold\""}), HasSubstr("SCAFFOLD"));
}

}  // namespace
}  // namespace brigade
