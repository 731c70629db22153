// llm.c / nanoGPT token files (header of 256 int32: magic 20240520, version 1, count; uint16
// tokens), written here byte by byte as llm.c's dev/data/data_common.py writes them, load as
// data.source = "shards": every split's files in name order, their tokens exactly, their ids
// checked against model.vocab; malformed headers are refused naming the file; and a GPT trains
// on them through the real CLI.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "brigade/base/error.h"
#include "brigade/data/streamed_token_dataset.h"
#include "brigade/data/token_shard.h"
#include "brigade/runtime/config.h"
#include "brigade/train/training_data.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using testing::TempDir;

void write_llmc(const std::string& path, const std::vector<uint16_t>& tokens, int32_t count = -1,
                int32_t magic = 20240520, int32_t version = 1) {
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof(header));  // little-endian host
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
}

std::vector<uint16_t> ramp(int n, int offset, int modulo) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = static_cast<uint16_t>((i * 7 + offset) % modulo);
  return t;
}

// Every token of a split, as the (streamed) dataset holds it.
std::vector<int32_t> all_tokens(const Dataset& dataset) {
  const auto& ds = dynamic_cast<const StreamedTokenDataset&>(dataset);
  std::vector<int32_t> out(static_cast<size_t>(ds.num_tokens()));
  ds.copy_tokens(0, ds.num_tokens(), out.data());
  return out;
}

Config shards_config(const std::string& dir, int64_t vocab) {
  return parse_config("", "test",
                      {"data.source=shards", "data.path=" + dir,
                       "model.vocab=" + std::to_string(vocab), "model.seq_len=16"});
}

TEST(LlmcShardsTest, SplitsConcatenateInNameOrderAndIdsAreExact) {
  TempDir dir;
  const auto a = ramp(300, 1, 1000), b = ramp(200, 5, 1000), v = ramp(100, 9, 1000);
  write_llmc(dir.file("web_train_000002.bin"), b);  // written first, read second
  write_llmc(dir.file("web_train_000001.bin"), a);
  write_llmc(dir.file("web_val_000000.bin"), v);
  const TrainingData data =
      load_training_data(shards_config(dir.path(), 1000), {dir.path() + "/run"});
  EXPECT_EQ(data.tokenizer, nullptr) << "llm.c ids belong to a tokenizer brigade does not have";
  std::vector<int32_t> expected(a.begin(), a.end());
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(all_tokens(*data.train), expected);
  EXPECT_EQ(all_tokens(*data.val), std::vector<int32_t>(v.begin(), v.end()));
  EXPECT_EQ(data.source_files.size(), 3u);

  TokenShardInfo info = read_token_shard_info(dir.file("web_val_000000.bin"));
  EXPECT_TRUE(info.llmc);
  EXPECT_EQ(info.num_tokens, 100u);
  EXPECT_EQ(info.dtype_bytes, 2u);
}

TEST(LlmcShardsTest, IdsAboveTheModelVocabularyAndBadHeadersAreRefused) {
  TempDir dir;
  write_llmc(dir.file("x_train.bin"), ramp(300, 1, 1000));
  write_llmc(dir.file("x_val.bin"), ramp(100, 1, 1000));
  testing::expect_throw_mentioning<ConfigError>(
      [&] { load_training_data(shards_config(dir.path(), 512), {dir.path() + "/run"}); },
      "model.vocab = 512");
  TempDir bad;
  write_llmc(bad.file("y_train.bin"), ramp(300, 1, 100), 301);  // says one token more
  write_llmc(bad.file("y_val.bin"), ramp(100, 1, 100));
  testing::expect_throw_mentioning<IoError>(
      [&] { load_training_data(shards_config(bad.path(), 512), {bad.path() + "/run"}); },
      "y_train.bin: bad llm.c token file: header says 301 tokens");
  write_llmc(bad.file("y_train.bin"), ramp(300, 1, 100), -1, 20240520, 3);
  testing::expect_throw_mentioning<IoError>([&] { read_token_shard(bad.file("y_train.bin")); },
                                            "magic 20240520 with version 3");
  TempDir no_val;
  write_llmc(no_val.file("z_train.bin"), ramp(300, 1, 100));
  testing::expect_throw_mentioning<IoError>(
      [&] { load_training_data(shards_config(no_val.path(), 512), {no_val.path() + "/run"}); },
      "no val split");
}

TEST(LlmcShardsTest, AGptTrainsOnThemThroughTheCli) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("tok"));
  write_llmc(dir.file("tok/d_train_000001.bin"), ramp(5000, 3, 300));
  write_llmc(dir.file("tok/d_val_000000.bin"), ramp(800, 4, 300));
  testing::write_bytes(dir.file("run.toml"),
                       testing::tiny_gpt_config({{"data.source", "\"shards\""},
                                                 {"data.path", "\"" + dir.file("tok") + "\""},
                                                 {"model.vocab", "300"},
                                                 {"train.steps", "3"},
                                                 {"train.warmup", "1"}}));
  const auto r =
      testing::run_command(std::string(BRIGADE_BINARY) + " train " + dir.file("run.toml") +
                           " --set run.out_dir=" + dir.file("runs"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("llm.c token files in"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brigade
