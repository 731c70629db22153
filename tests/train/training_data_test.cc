// Shard folders whose data does not fit their tokenizer or the context (issue 13, defects 4
// and 6): token ids beyond the tokenizer's vocabulary (tokenizer.bpe deleted, or with fewer
// merges than the shards use) are an IoError naming the file, the first bad id and its position
// (they aborted in a CHECK), `brigade train` exits 3 and is not restarted; too few tokens name
// the file. The abort-prone cases run in a child process.
#include "brigade/train/training_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "brigade/base/error.h"
#include "brigade/data/bpe.h"
#include "brigade/data/token_shard.h"
#include "common/run_command.h"
#include "common/run_in_child.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::run_in_child;

// Tokens 0..299, one window of 16 every 17; id 256 first appears at position 256.
std::vector<int32_t> ramp(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i % 300;
  return t;
}

class ShardFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("shard-folder");
    ASSERT_FALSE(dir_.empty());
    write_token_shard(dir_ + "/train.bin", ramp(600), 300);
    write_token_shard(dir_ + "/val.bin", ramp(100), 300);
  }
  Config config(int64_t seq_len = 16) const {
    Config c = parse_config("", "test.toml",
                            {"data.source=\"shards\"", "data.path=\"" + dir_ + "\"",
                             "model.vocab=512", "model.seq_len=" + std::to_string(seq_len)});
    c.validate();
    return c;
  }
  testing::ChildOutcome load() const {
    const Config c = config();
    return run_in_child([&] { load_training_data(c, RunFolder{dir_ + "/run"}); }, 30);
  }
  std::string dir_;
};

TEST_F(ShardFolder, IdsBeyondTheByteTokenizerNameTheFileAndTheFirstBadId) {
  // No tokenizer.bpe: bytes are assumed, and id 256 at position 256 is not a byte.
  const auto r = load();
  EXPECT_EQ(r.exit_code, kExitIo) << r.describe();
  EXPECT_THAT(r.message, HasSubstr(dir_ + "/train.bin: token id 256 at position 256"));
  EXPECT_THAT(r.message, HasSubstr("tokenizer.bpe is absent"));
}

TEST_F(ShardFolder, IdsBeyondAShortMergesFileNameTheFile) {
  // A tokenizer with 10 merges (ids 0..265) for shards that use ids up to 299.
  std::string text;
  for (int i = 0; i < 50; ++i) text += "ab cd ef gh ij kl mn op " + std::to_string(i) + " ";
  const BpeTokenizer small = BpeTokenizer::train(text, 266);
  ASSERT_EQ(small.vocab_size(), 266);
  small.save(dir_ + "/tokenizer.bpe");
  const auto r = load();
  EXPECT_EQ(r.exit_code, kExitIo) << r.describe();
  EXPECT_THAT(r.message, HasSubstr(dir_ + "/train.bin: token id 266 at position 266"));
  EXPECT_THAT(r.message, HasSubstr(dir_ + "/tokenizer.bpe (266 ids)"));
}

TEST_F(ShardFolder, TooFewTokensNameTheFile) {
  // Byte tokens (no tokenizer.bpe), enough to train on, too few to validate on.
  write_token_shard(dir_ + "/train.bin", std::vector<int32_t>(600, 'a'), 256);
  write_token_shard(dir_ + "/val.bin", std::vector<int32_t>(10, 'b'), 256);
  try {
    load_training_data(config(16), RunFolder{dir_ + "/run"});
    ADD_FAILURE() << "10 validation tokens were accepted for windows of 17";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir_ + "/val.bin has 10 tokens"));
    EXPECT_THAT(e.what(), HasSubstr("model.seq_len = 16"));
  }
}

TEST_F(ShardFolder, TrainExitsWithTheFileErrorCode) {
  // Before: SIGABRT (exit 134) from a CHECK, and again on every elastic restart.
  const std::string config = dir_ + "/shards.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"data.source", "\"shards\""},
                                                     {"data.path", "\"" + dir_ + "\""},
                                                     {"model.vocab", "512"},
                                                     {"model.seq_len", "16"},
                                                     {"train.steps", "2"},
                                                     {"run.out_dir", "\"" + dir_ + "/runs\""}});
  const auto r = testing::run_command(std::string(BRIGADE_BINARY) + " train " + config, 120);
  EXPECT_EQ(r.exit_code, kExitIo) << r.output;
  EXPECT_THAT(r.output, HasSubstr("train.bin: token id 256 at position 256"));
}

}  // namespace
}  // namespace brigade
