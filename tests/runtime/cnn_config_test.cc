// model.kind = "cnn" in the config: model.hidden's kind-specific default (NIID-Bench's [120, 84]
// only where no file or --set gives the key), model.channels, the resolved config, the shipped
// configs/fashion-mnist-cnn.toml, and every layout the CNN cannot run refused naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"
#include "common/config_error.h"

namespace brigade {
namespace {

using testing::config_error_of;
using ::testing::HasSubstr;

const std::vector<std::string> kCnn = {"model.kind=cnn", "data.source=fashion_mnist"};

std::vector<std::string> cnn_with(const std::string& assignment) {
  std::vector<std::string> overrides = kCnn;
  overrides.push_back(assignment);
  return overrides;
}

TEST(CnnConfig, HiddenDefaultsToNiidBenchWidthsWhereNotGiven) {
  const Config from_file =
      parse_config("[model]\nkind = \"cnn\"\n[data]\nsource = \"fashion_mnist\"\n", "t");
  EXPECT_EQ(from_file.model.hidden, (std::vector<int64_t>{120, 84}));
  EXPECT_EQ(from_file.model.channels, (std::vector<int64_t>{6, 16}));
  EXPECT_NO_THROW(from_file.validate());
  // The kind from --set, too.
  EXPECT_EQ(parse_config("", "t", kCnn).model.hidden, (std::vector<int64_t>{120, 84}));
  // The MLP keeps its own default.
  EXPECT_EQ(parse_config("[model]\nkind = \"mlp\"\n", "t").model.hidden,
            (std::vector<int64_t>{256, 128}));
}

TEST(CnnConfig, GivenHiddenAndChannelsAreKept) {
  const Config c = parse_config("[model]\nkind = \"cnn\"\nhidden = [64]\nchannels = [8]\n", "t");
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64}));
  EXPECT_EQ(c.model.channels, (std::vector<int64_t>{8}));
  EXPECT_EQ(parse_config("", "t", cnn_with("model.hidden=[32, 16]")).model.hidden,
            (std::vector<int64_t>{32, 16}));
  // [256, 128] written out is a choice, not the absent key.
  EXPECT_EQ(parse_config("[model]\nkind = \"cnn\"\nhidden = [256, 128]\n", "t").model.hidden,
            (std::vector<int64_t>{256, 128}));
  // No hidden layer: conv stages straight into the output layer (an MLP needs one).
  EXPECT_EQ(config_error_of(cnn_with("model.hidden=[]")), "");
  EXPECT_THAT(config_error_of({"model.kind=mlp", "data.source=fashion_mnist", "model.hidden=[]"}),
              HasSubstr("model.hidden"));
}

TEST(CnnConfig, ResolvedConfigRecordsTheWidthsUsed) {
  const Config c = parse_config("", "t", kCnn);
  const std::string toml = c.to_toml();
  EXPECT_THAT(toml, HasSubstr("hidden = [120, 84]"));
  EXPECT_THAT(toml, HasSubstr("channels = [6, 16]"));
  const Config again = parse_config(toml, "resolved");
  EXPECT_EQ(again.model.hidden, c.model.hidden);
  EXPECT_EQ(again.model.channels, c.model.channels);
}

TEST(CnnConfig, ShippedConfigIsTheNiidBenchCnn) {
  const Config c = load_config(std::string(BRIGADE_SOURCE_DIR) + "/configs/fashion-mnist-cnn.toml");
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.model.kind, ModelKind::kCnn);
  EXPECT_EQ(c.data.source, DataSource::kFashionMnist);
  EXPECT_EQ(c.model.channels, (std::vector<int64_t>{6, 16}));
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{120, 84}));
}

TEST(CnnConfig, ChannelsOutOfRangeNameTheKey) {
  EXPECT_THAT(config_error_of(cnn_with("model.channels=[6, 16, 32]")),
              HasSubstr("model.channels = [6, 16, 32]: needs 1 or 2 conv stages"));
  EXPECT_THAT(config_error_of(cnn_with("model.channels=[]")), HasSubstr("model.channels = []"));
  EXPECT_THAT(config_error_of(cnn_with("model.channels=[6, 0]")),
              HasSubstr("model.channels[i] = 0"));
  EXPECT_EQ(config_error_of(cnn_with("model.channels=[4]")), "");
}

TEST(CnnConfig, LayoutsWithoutCnnPiecesAreRefusedNamingTheKey) {
  EXPECT_THAT(config_error_of(cnn_with("data.source=fortunes")), HasSubstr("data.source"));
  for (const char* layout : {"parallel.tp=2", "parallel.pp=2"}) {
    SCOPED_TRACE(layout);
    const std::string e = config_error_of(cnn_with(layout));
    EXPECT_THAT(e, HasSubstr("model.kind = \"cnn\""));
    EXPECT_THAT(e, HasSubstr("must be \"gpt\""));
  }
  EXPECT_THAT(config_error_of(cnn_with("model.n_experts=4")), HasSubstr("model.n_experts"));
  EXPECT_THAT(config_error_of(cnn_with("parallel.zero=3")), HasSubstr("parallel.zero"));
  EXPECT_THAT(config_error_of(cnn_with("train.recompute=block")), HasSubstr("train.recompute"));
  // What data parallelism shards without the model's help works as for the MLP.
  EXPECT_EQ(config_error_of(cnn_with("parallel.zero=2")), "");
}

}  // namespace
}  // namespace brigade
