// A federated GPT (sync.method = "fed", model.kind = "gpt") is refused before any process starts
// where its clients could not train one model: text that is not byte tokens, no held-out text
// for the coordinator, a data.path no process would read, an attack that flips class labels,
// LoRA adapters; and a classifier federation still needs Fashion-MNIST.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/config_error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

using testing::config_error_of;

std::vector<std::string> text_federation(std::vector<std::string> more) {
  std::vector<std::string> o = {"sync.method=\"fed\"", "model.kind=\"gpt\"", "data.source=\"text\"",
                                "fed.client_data=\"d/client_{client}\"",
                                "fed.test_data=\"d/validation.txt\""};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

TEST(FedTextConfig, AGptFederationOnByteTokensIsAccepted) {
  EXPECT_EQ(config_error_of(text_federation({})), "");
  EXPECT_EQ(config_error_of(text_federation({"fed.attack=\"sign_flip\"", "fed.attackers=1"})), "");
}

TEST(FedTextConfig, WhatCannotWorkIsRefusedByKey) {
  EXPECT_THAT(config_error_of(text_federation({"data.tokenizer=\"bpe\"", "model.vocab=512"})),
              HasSubstr("data.tokenizer = \"bpe\": federated text uses byte tokens"));
  EXPECT_THAT(config_error_of(text_federation({"fed.test_data=\"\""})),
              HasSubstr("fed.test_data = \"\": must name the coordinator's held-out text"));
  EXPECT_THAT(config_error_of(text_federation({"fed.attack=\"label_flip\"", "fed.attackers=1"})),
              HasSubstr("fed.attack = \"label_flip\""));
  EXPECT_THAT(config_error_of(text_federation({"lora.rank=4"})), HasSubstr("lora.rank = 4"));
  EXPECT_THAT(config_error_of(text_federation({"data.path=\"corpus.txt\""})),
              HasSubstr("no process of a federation reads it"));
  EXPECT_THAT(config_error_of(text_federation({"data.source=\"fortunes\""})),
              HasSubstr("data.source = \"fortunes\": a federated GPT's clients read text folders"));
  EXPECT_THAT(config_error_of({"sync.method=\"fed\"", "model.kind=\"mlp\"", "data.source=\"text\"",
                               "fed.client_data=\"d/client_{client}\""}),
              HasSubstr("fashion_mnist"));
}

}  // namespace
}  // namespace brigade
