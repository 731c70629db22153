// model.vocab = 0 takes the vocabulary from the data (issue 18: "read from the data where it can
// be, not demanded twice"). References: the vocabulary written into the files by the test itself
// (a shard header, llm.c's GPT-2 format), 256 for bytes, and a run with the same vocabulary given
// by hand, which must train bitwise alike.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/data/token_shard.h"
#include "brigade/runtime/config.h"
#include "brigade/train/training_data.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

std::vector<int32_t> ramp(int n, int modulo) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 7 + i / 5) % modulo);
  return t;
}

Config shards_config(const std::string& dir) {
  Config c;
  c.model.vocab = 0;
  c.model.seq_len = 16;
  c.data.source = DataSource::kShards;
  c.data.path = dir;
  return c;
}

TEST(VocabFromData, ShardHeaderLlmcFormatAndBytes) {
  const std::string dir = make_temp_dir("vocab-shards");
  write_token_shard(dir + "/train.bin", ramp(400, 300), 300);
  write_token_shard(dir + "/val.bin", ramp(100, 300), 300);
  Config c = shards_config(dir);
  c.validate();
  resolve_vocab_from_data(c);
  EXPECT_EQ(c.model.vocab, 300);

  // llm.c's GPT-2 files (uint16, magic 20240520) record no vocabulary: GPT-2's.
  const std::string llmc = make_temp_dir("vocab-llmc");
  int32_t header[256] = {20240520, 1, 50};
  std::vector<uint16_t> tokens(50, 7);
  std::ofstream out(llmc + "/tiny_train.bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), 100);
  out.close();
  Config l = shards_config(llmc);
  resolve_vocab_from_data(l);
  EXPECT_EQ(l.model.vocab, 50257);

  Config bytes;
  bytes.model.vocab = 0;
  bytes.validate();
  resolve_vocab_from_data(bytes);
  EXPECT_EQ(bytes.model.vocab, 256);
  Config given;
  given.model.vocab = 300;
  resolve_vocab_from_data(given);
  EXPECT_EQ(given.model.vocab, 300);  // a given vocabulary is left alone

  // BPE merges are trained up to model.vocab: 0 cannot mean anything there.
  Config bpe;
  bpe.model.vocab = 0;
  bpe.data.tokenizer = TokenizerKind::kBpe;
  EXPECT_THROW(bpe.validate(), ConfigError);
}

TEST(VocabFromData, ARunFromTheDataEqualsOneGivenTheSameVocabulary) {
  const std::string dir = make_temp_dir("vocab-run");
  // Byte ids (no tokenizer.bpe beside them) in shards that record a vocabulary of 300.
  write_token_shard(dir + "/train.bin", ramp(4000, 256), 300);
  write_token_shard(dir + "/val.bin", ramp(800, 256), 300);
  const std::string config = dir + "/run.toml";
  std::ofstream(config) << testing::tiny_gpt_config(
      {{"data.source", "\"shards\""}, {"data.path", "\"" + dir + "\""}, {"train.steps", "4"}});
  const std::string bin = BRIGADE_BINARY;
  const std::string base = bin + " train " + config + " --set run.out_dir=" + dir;
  const auto from_data = run_command(base + " --set run.name=auto --set model.vocab=0", 120);
  ASSERT_EQ(from_data.exit_code, 0) << from_data.output;
  const auto given = run_command(base + " --set run.name=given --set model.vocab=300", 120);
  ASSERT_EQ(given.exit_code, 0) << given.output;
  const std::vector<double> a = testing::train_series(dir + "/auto/metrics.jsonl");
  const std::vector<double> b = testing::train_series(dir + "/given/metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  // The run records the vocabulary it used, so eval and generate rebuild the same model.
  const Config saved = load_config(dir + "/auto/config.toml");
  EXPECT_EQ(saved.model.vocab, 300);
}

}  // namespace
}  // namespace brigade
