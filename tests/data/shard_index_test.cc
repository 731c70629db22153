// Numbered token shards and their index (data/shard_cutter.h, data/shard_index.h,
// data/shard_writer.h). References: load_text_files' split texts and BpeTokenizer::encode of
// the whole split, which the shards must reproduce exactly at every shard size; and the index's
// own writer, whose every field the reader checks.
#include "brigade/data/shard_index.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/shard_cutter.h"
#include "brigade/data/shard_writer.h"
#include "brigade/data/text_corpus.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;
using testing::TempDir;
using testing::write_bytes;

// Paragraphs that start with spaces and tabs (pre-tokens that reach back over the separator
// would show here), UTF-8, and long and short documents.
std::string tricky_corpus(uint32_t seed) {
  std::string text;
  for (int i = 0; i < 60; ++i) {
    if (i % 3 == 0) text += "   indented start ";
    if (i % 7 == 0) text += "\t tab then space ";
    text += testing::synthetic_text(50 + (i * 37) % 900, seed + i);
    text += i % 5 == 0 ? "\n\n\n  \n" : "\n\n";
  }
  return text;
}

struct Cut {
  std::string text[2];
  std::vector<ShardText> shards;
};

Cut cut(const std::string& spec, int64_t shard_bytes, double val_fraction) {
  Cut out;
  ShardCutter cutter(shard_bytes, val_fraction, [&](ShardText&& s) {
    out.text[static_cast<int>(s.split)] += s.text;
    out.shards.push_back(std::move(s));
  });
  cut_corpus("text", spec, cutter);
  return out;
}

class ShardCutterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.file("corpus/sub"));
    write_bytes(dir_.file("corpus/a.txt"), tricky_corpus(1));
    write_bytes(dir_.file("corpus/sub/b.txt"), tricky_corpus(2));
    write_bytes(dir_.file("corpus/c.txt"), testing::synthetic_text(20000, 3));
  }
  TempDir dir_;
};

TEST_F(ShardCutterTest, ShardsConcatenateToTheSplitTextsAndTheirTokens) {
  const std::string spec = dir_.file("corpus");
  const TextSplits splits = load_text_files(spec, 0.2);
  ASSERT_GT(splits.val_docs, 5);
  const BpeTokenizer bpe = BpeTokenizer::train(splits.train, 400);
  const std::vector<int32_t> whole[2] = {bpe.encode(splits.train), bpe.encode(splits.val)};
  for (int64_t shard_bytes : {int64_t{1}, int64_t{97}, int64_t{5000}, int64_t{1} << 30}) {
    const Cut c = cut(spec, shard_bytes, 0.2);
    EXPECT_EQ(c.text[0], splits.train) << shard_bytes;
    EXPECT_EQ(c.text[1], splits.val) << shard_bytes;
    std::vector<int32_t> tokens[2];
    int64_t docs[2] = {0, 0}, numbers[2] = {0, 0};
    std::vector<int64_t> sizes[2];
    for (size_t u = 0; u < c.shards.size(); ++u) {
      const ShardText& s = c.shards[u];
      const int k = static_cast<int>(s.split);
      EXPECT_EQ(s.unit, static_cast<int64_t>(u));
      EXPECT_EQ(s.number, numbers[k]++);
      docs[k] += s.docs;
      sizes[k].push_back(static_cast<int64_t>(s.text.size()));
      const std::vector<int32_t> t = bpe.encode(s.text);
      tokens[k].insert(tokens[k].end(), t.begin(), t.end());
    }
    // Every shard reaches the size but each split's last.
    for (const auto& v : sizes) {
      for (size_t i = 0; i + 1 < v.size(); ++i) EXPECT_GE(v[i], shard_bytes) << i;
    }
    EXPECT_EQ(docs[0], splits.train_docs);
    EXPECT_EQ(docs[1], splits.val_docs);
    EXPECT_EQ(tokens[0], whole[0]) << shard_bytes;
    EXPECT_EQ(tokens[1], whole[1]) << shard_bytes;
  }
  // One document per shard at size 1.
  EXPECT_EQ(static_cast<int64_t>(cut(spec, 1, 0.2).shards.size()),
            splits.train_docs + splits.val_docs);
}

TEST_F(ShardCutterTest, RefusesASizeBelowOne) {
  expect_throw_mentioning<ConfigError>([] { ShardCutter(0, 0.1, [](ShardText&&) {}); },
                                       "--shard-bytes = 0");
}

// A folder as `brigade tokenize` writes it, for the reader's tests.
class IndexedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    write_bytes(dir_.file("corpus.txt"), tricky_corpus(5));
    splits_ = load_text_files(dir_.file("corpus.txt"), 0.2);
    const BpeTokenizer bpe = BpeTokenizer::train(splits_.train, 300);
    bpe.save(dir_.file("tokenizer.bpe"));
    index_.tokenizer = "bpe";
    const FileDigest d = digest_file(dir_.file("tokenizer.bpe"));
    index_.tokenizer_bytes = d.bytes;
    index_.tokenizer_crc32 = d.crc32;
    index_.vocab = static_cast<uint32_t>(bpe.vocab_size());
    index_.val_fraction = 0.2;
    index_.shard_text_bytes = 3000;
    ShardCutter cutter(3000, 0.2, [&](ShardText&& s) {
      (s.split == Split::kTrain ? index_.train : index_.val)
          .shards.push_back(write_shard(dir_.path(), s, bpe, 0));
    });
    cut_corpus("text", dir_.file("corpus.txt"), cutter);
    write_file_atomic(dir_.file("index.json"), shard_index_json(index_));
    train_ = bpe.encode(splits_.train);
    val_ = bpe.encode(splits_.val);
  }
  TempDir dir_;
  TextSplits splits_;
  TokenShardIndex index_;
  std::vector<int32_t> train_, val_;
};

TEST_F(IndexedFolder, ReadsBackTheWholeSplitsAndRoundTripsTheIndex) {
  ASSERT_GT(index_.train.shards.size(), 3u);
  ASSERT_GT(index_.val.shards.size(), 0u);
  const IndexedSplits r = read_indexed_shards(dir_.path());
  EXPECT_EQ(r.train, train_);
  EXPECT_EQ(r.val, val_);
  EXPECT_EQ(r.index.train.shards, index_.train.shards);
  EXPECT_EQ(r.index.val.shards, index_.val.shards);
  EXPECT_EQ(r.index.train.docs(), splits_.train_docs);
  EXPECT_EQ(r.index.train.text_bytes(), static_cast<int64_t>(splits_.train.size()));
  EXPECT_EQ(shard_index_json(r.index), testing::read_bytes(dir_.file("index.json")));
  EXPECT_EQ(r.files.size(), 2 + index_.train.shards.size() + index_.val.shards.size());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("train_000000.bin.tmp")));
}

TEST_F(IndexedFolder, RefusesAMissingDamagedOrForeignFileNamingIt) {
  const std::string shard = dir_.file("train_000001.bin");
  std::string bytes = testing::read_bytes(shard);
  bytes[100] ^= 1;
  write_bytes(shard, bytes);
  expect_throw_mentioning<IoError>(
      [&] { read_indexed_shards(dir_.path()); },
      shard + ": " + std::to_string(bytes.size()) + " bytes with CRC-32");
  std::filesystem::remove(shard);
  expect_throw_mentioning<IoError>([&] { read_indexed_shards(dir_.path()); },
                                   shard + ": listed in index.json but missing");
  std::filesystem::remove(dir_.file("tokenizer.bpe"));
  expect_throw_mentioning<IoError>([&] { read_indexed_shards(dir_.path()); },
                                   dir_.file("tokenizer.bpe") + ": listed in index.json");
  // Byte tokens with a merges file beside them: which one made the shards is unknown.
  TokenShardIndex bytes_index;
  write_file_atomic(dir_.file("index.json"), shard_index_json(bytes_index));
  write_bytes(dir_.file("tokenizer.bpe"), "brigade-bpe 1\n");
  expect_throw_mentioning<IoError>([&] { read_indexed_shards(dir_.path()); },
                                   dir_.file("tokenizer.bpe") + ": present");
}

TEST_F(IndexedFolder, ParserRefusesInconsistentIndexesNamingTheField) {
  const std::string good = testing::read_bytes(dir_.file("index.json"));
  const std::string path = dir_.file("index.json");
  auto refuses = [&](const std::string& from, const std::string& to, const std::string& needle) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    expect_throw_mentioning<IoError>([&] { parse_shard_index(text, path); }, needle);
  };
  refuses("\"format\": 1", "\"format\": 2", "format: 2");
  refuses("\"train_000001.bin\"", "\"../x.bin\"", "splits.train.shards[1].file");
  refuses("\"train_000001.bin\"", "\"train_000002.bin\"", "expected \"train_000001.bin\"");
  refuses("\"tokenizer\": \"bpe\"", "\"tokenizer\": \"gpt2\"", "tokenizer:");
  refuses("\"val_fraction\": 0.2", "\"val_fraction\": 1.5", "val_fraction");
  const std::string tokens0 = "\"tokens\": " + std::to_string(index_.train.shards[0].tokens);
  refuses(tokens0, "\"tokens\": 1", "splits.train.shards[0]: ");
  const std::string docs = "\"docs\": " + std::to_string(index_.train.docs());
  refuses(docs, "\"docs\": 1", "splits.train.docs: 1, but its shards add up to");
  refuses("\"crc32\": \"0x", "\"crc32\": \"1x", "crc32: expected");
  refuses("\"vocab\": ", "\"vocab\": -", "index.vocab");
  expect_throw_mentioning<IoError>([&] { parse_shard_index("[", path); }, path);
  expect_throw_mentioning<IoError>([&] { parse_shard_index("{}", path); }, "missing \"format\"");
}

TEST(ShardNames, TokenizeOutputIsRecognisedAndNothingElse) {
  EXPECT_EQ(shard_file_name("train", 42), "train_000042.bin");
  for (const char* name : {"index.json", "index.json.tmp", "tokenizer.bpe", "train.bin", "val.bin",
                           "train_000000.bin", "val_999999.bin.tmp"}) {
    EXPECT_TRUE(is_tokenize_output_name(name)) << name;
  }
  for (const char* name : {"notes.txt", "train_1.bin", "test_000000.bin", "train_00000a.bin",
                           "fineweb_train_000001.bin", "train_000000.binx"}) {
    EXPECT_FALSE(is_tokenize_output_name(name)) << name;
  }
}

TEST(ShardNames, ClearingRemovesOnlyTokenizeOutput) {
  TempDir dir;
  for (const char* name : {"index.json", "train_000003.bin.tmp", "val.bin", "tokenizer.bpe",
                           "notes.txt", "fineweb_train_000001.bin"}) {
    write_bytes(dir.file(name), "x");
  }
  EXPECT_TRUE(has_numbered_shards(dir.path()));
  clear_tokenize_output(dir.path());
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"fineweb_train_000001.bin", "notes.txt"}));
  EXPECT_FALSE(has_numbered_shards(dir.path()));
}

}  // namespace
}  // namespace brigade
