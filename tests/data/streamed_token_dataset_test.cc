// Streamed token datasets (issue 18: many shards per split, mapped, never held): the examples of
// a StreamedTokenDataset over shards of several sizes (empty ones and shards shorter than a
// window among them, so windows cross one or more boundaries) equal those of a TokenDataset over
// the concatenated tokens, an independent reference, for several seq_len and both token widths;
// load_training_data on an indexed folder gives those examples and the whole-text statistics
// bitwise; and damaged shards (CRC, an id the vocabulary does not allow, truncation) are refused
// before use with an IoError naming the file, as the whole-load reader refused them.
#include "brigade/data/streamed_token_dataset.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <random>
#include <tuple>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/bpe.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/token_shard.h"
#include "brigade/runtime/config.h"
#include "brigade/train/training_data.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;
using testing::TempDir;

std::vector<int32_t> random_ids(int64_t n, uint32_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(gen() % vocab);
  return t;
}

// Writes one shard per size (tokens drawn from all), returns the concatenation.
std::vector<int32_t> write_shards(const TempDir& dir, const std::vector<int64_t>& sizes,
                                  uint32_t vocab, std::vector<std::string>& paths) {
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const std::vector<int32_t> all = random_ids(total, vocab, 17 + static_cast<uint32_t>(total));
  int64_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    paths.push_back(dir.file(fmt::format("s{}.bin", paths.size())));
    write_token_shard(paths.back(), std::span(all).subspan(static_cast<size_t>(at), sizes[k]),
                      vocab);
    at += sizes[k];
  }
  return all;
}

void expect_same_examples(const Dataset& got, const Dataset& want, int64_t seq_len,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  // Every example, in batches of 5 in a shuffled order (the last one partial).
  std::vector<int64_t> ids(static_cast<size_t>(want.size()));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  Batch a = got.make_batch(5), b = want.make_batch(5);
  for (size_t first = 0; first < ids.size(); first += 5) {
    const int64_t n = std::min<int64_t>(5, static_cast<int64_t>(ids.size() - first));
    got.fill(a, ids.data() + first, n);
    want.fill(b, ids.data() + first, n);
    ASSERT_EQ(a.size, n);
    ASSERT_EQ(a.seq_len, seq_len);
    const auto m = static_cast<size_t>(n * seq_len);
    ASSERT_TRUE(std::equal(a.tokens.begin(), a.tokens.begin() + m, b.tokens.begin()))
        << what << ", batch at " << first;
    ASSERT_TRUE(std::equal(a.targets.begin(), a.targets.begin() + m, b.targets.begin()))
        << what << ", batch at " << first;
  }
}

TEST(StreamedTokenDataset, ExamplesEqualATokenDatasetOverTheConcatenation) {
  const std::vector<std::vector<int64_t>> layouts = {
      {500},                           // one shard
      {37, 0, 101, 5, 1, 64, 0, 250},  // empty shards and shards shorter than a window
      {16, 17, 15, 33, 1, 1, 1, 200},  // boundaries at, just after and just before windows
  };
  for (const uint32_t vocab : {300u, 70000u}) {  // uint16 and uint32 tokens
    for (size_t l = 0; l < layouts.size(); ++l) {
      TempDir dir;
      std::vector<std::string> paths;
      const std::vector<int32_t> all = write_shards(dir, layouts[l], vocab, paths);
      for (const int64_t seq_len : {1, 3, 16, 31, 64}) {
        std::vector<MappedTokenShard> shards;
        for (const std::string& p : paths) shards.emplace_back(p);
        EXPECT_EQ(shards.front().info().dtype_bytes, vocab <= 65536 ? 2u : 4u);
        const StreamedTokenDataset streamed(std::move(shards), seq_len);
        const TokenDataset whole(all, seq_len);
        const std::string what = "vocab " + std::to_string(vocab) + ", layout " +
                                 std::to_string(l) + ", seq_len " + std::to_string(seq_len);
        EXPECT_EQ(streamed.num_tokens(), static_cast<int64_t>(all.size())) << what;
        // Windows that hold the last token of a shard and the first of the next: window
        // (b - 1) / T for a boundary b inside the split.
        int64_t crossing = 0, boundary = 0;
        for (size_t k = 0; k + 1 < layouts[l].size(); ++k) {
          boundary += layouts[l][k];
          if (boundary > 0 && (boundary - 1) / seq_len < streamed.size()) ++crossing;
        }
        if (layouts[l].size() > 1) {
          EXPECT_GT(crossing, 2) << what;
        }
        expect_same_examples(streamed, whole, seq_len, what);
        std::vector<int32_t> back(all.size());
        streamed.copy_tokens(0, streamed.num_tokens(), back.data());
        EXPECT_EQ(back, all) << what;
      }
    }
  }
  TempDir dir;
  std::vector<std::string> paths;
  write_shards(dir, {4, 4}, 300, paths);
  std::vector<MappedTokenShard> shards;
  for (const std::string& p : paths) shards.emplace_back(p);
  EXPECT_THROW(StreamedTokenDataset(std::move(shards), 8), ConfigError) << "8 tokens, T + 1 = 9";
}

// A folder as `brigade tokenize` writes it, from given byte-token shards, with its index.
class ByteShardFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string text = testing::synthetic_text(6000, 4);
    std::vector<int32_t> ids;
    for (const unsigned char c : text) ids.push_back(c);
    val_ = std::vector<int32_t>(ids.begin(), ids.begin() + 900);
    train_ = std::vector<int32_t>(ids.begin() + 900, ids.end());
    index_.tokenizer = "byte";
    index_.vocab = 256;
    add_split(train_, {700, 1, 1300, 0, 997}, "train", index_.train);
    add_split(val_, {400}, "val", index_.val);
    write_index();
  }
  void add_split(const std::vector<int32_t>& tokens, std::vector<int64_t> sizes, const char* split,
                 SplitIndex& out) {
    sizes.back() = static_cast<int64_t>(tokens.size()) -
                   std::accumulate(sizes.begin(), sizes.end() - 1, int64_t{0});
    int64_t at = 0;
    for (const int64_t n : sizes) {
      ShardEntry e;
      e.file = shard_file_name(split, static_cast<int64_t>(out.shards.size()));
      write_token_shard(dir_.file(e.file), std::span(tokens).subspan(static_cast<size_t>(at), n),
                        256);
      e.tokens = n;
      e.text_bytes = n;
      e.docs = 1;
      const FileDigest d = digest_file(dir_.file(e.file));
      e.bytes = d.bytes;
      e.crc32 = d.crc32;
      out.shards.push_back(e);
      at += n;
    }
  }
  void write_index() { write_file_atomic(dir_.file("index.json"), shard_index_json(index_)); }
  // Rewrites a shard's bytes and, when `record`, the index's size and CRC-32 of it.
  void replace_shard(size_t k, const std::string& bytes, bool record) {
    ShardEntry& e = index_.train.shards[k];
    testing::write_bytes(dir_.file(e.file), bytes);
    if (record) {
      e.crc32 = crc32_of(bytes);
      write_index();
    }
  }
  Config config(int64_t seq_len) const {
    Config c = parse_config("", "test.toml",
                            {"data.source=\"shards\"", "data.path=\"" + dir_.path() + "\"",
                             "model.vocab=256", "model.seq_len=" + std::to_string(seq_len)});
    c.validate();
    return c;
  }
  TrainingData load(int64_t seq_len = 16) const {
    return load_training_data(config(seq_len), RunFolder{dir_.path() + "/run"});
  }
  TempDir dir_;
  TokenShardIndex index_;
  std::vector<int32_t> train_, val_;
};

TEST_F(ByteShardFolder, TrainingDataIsTheWholeLoadOnesExamplesAndStatistics) {
  for (const int64_t seq_len : {7, 16, 32}) {
    const TrainingData data = load(seq_len);
    ASSERT_NE(dynamic_cast<const StreamedTokenDataset*>(data.train.get()), nullptr);
    expect_same_examples(*data.train, TokenDataset(train_, seq_len), seq_len, "train");
    expect_same_examples(*data.val, TokenDataset(val_, seq_len), seq_len, "val");
    // The statistics the whole-load path computed from the decoded splits, bitwise.
    const std::string train_text(train_.begin(), train_.end());
    const std::string val_text(val_.begin(), val_.end());
    EXPECT_EQ(data.unigram_bits_per_byte, unigram_bits_per_byte(train_text, val_text));
    EXPECT_EQ(data.val_bytes_per_token, 1.0);
    EXPECT_EQ(data.source_files.size(), 1 + index_.train.shards.size() + 1);
  }
}

TEST_F(ByteShardFolder, ADamagedShardIsRefusedNamingTheFile) {
  const std::string path = dir_.file(index_.train.shards[2].file);
  const std::string good = testing::read_bytes(path);
  // A changed byte: the CRC-32 no longer matches.
  std::string flipped = good;
  flipped[200] ^= 1;
  replace_shard(2, flipped, false);
  expect_throw_mentioning<IoError>(
      [&] { load(); }, path + ": " + std::to_string(good.size()) + " bytes with CRC-32");
  // Truncated (the index's size no longer holds), named from its size alone before any shard
  // is read.
  replace_shard(2, good.substr(0, good.size() - 10), false);
  expect_throw_mentioning<IoError>([&] { load(); }, path + ": " + std::to_string(good.size() - 10) +
                                                        " bytes, but index.json records " +
                                                        std::to_string(good.size()) + " bytes");
  // A link to /dev/zero in its place (the rest of the folder unchanged) is refused at once, not
  // read to an end it does not have.
  std::filesystem::remove(path);
  std::filesystem::create_symlink("/dev/zero", path);
  expect_throw_mentioning<IoError>([&] { load(); }, path + ": not a regular file");
  std::filesystem::remove(path);
  // An id the header's vocabulary does not allow, recorded in the index: refused at open,
  // naming the file and the id's index in it, as read_token_shard refuses it.
  std::string high = good;
  high[kTokenShardHeaderBytes + 2 * 55] = 0;
  high[kTokenShardHeaderBytes + 2 * 55 + 1] = 1;  // little-endian 256
  replace_shard(2, high, true);
  expect_throw_mentioning<IoError>(
      [&] { load(); }, path + ": bad token shard: token 256 at index 55 >= vocab size 256");
  expect_throw_mentioning<IoError>([&] { read_token_shard(path); },
                                   path + ": bad token shard: token 256 at index 55");
  // Its header says one token more than the file holds, CRC-32 recorded: the header check.
  std::string header = good;
  header[16] = static_cast<char>(header[16] + 1);
  replace_shard(2, header, true);
  expect_throw_mentioning<IoError>([&] { load(); }, path + ": bad token shard: header says");
  replace_shard(2, good, true);
  EXPECT_NO_THROW(load());
  // Missing.
  std::filesystem::remove(path);
  expect_throw_mentioning<IoError>([&] { load(); }, path + ": listed in index.json but missing");
}

TEST_F(ByteShardFolder, AnIdBeyondTheTokenizerNamesTheSplitAndItsPosition) {
  // A header vocabulary of 300 over byte tokens (no tokenizer.bpe): id 299 is allowed by the
  // shard but not by the byte tokenizer. Position counts over the split's shards.
  std::vector<int32_t> ids(train_.begin() + 701, train_.begin() + 2001);
  ids[40] = 299;
  const std::string bytes = token_shard_bytes(ids, 300);
  std::filesystem::remove(dir_.file("index.json"));
  // An unindexed folder of the old layout: train.bin and val.bin.
  for (const auto& e : index_.train.shards) std::filesystem::remove(dir_.file(e.file));
  for (const auto& e : index_.val.shards) std::filesystem::remove(dir_.file(e.file));
  testing::write_bytes(dir_.file("train.bin"), bytes);
  write_token_shard(dir_.file("val.bin"), val_, 256);
  Config c = config(16);
  c.model.vocab = 300;
  expect_throw_mentioning<IoError>(
      [&] { load_training_data(c, RunFolder{dir_.path() + "/run"}); },
      dir_.file("train.bin") + ": token id 299 at position 40 is outside the vocabulary");
}

TEST_F(ByteShardFolder, AnIdBeyondTheMergesCountsItsPositionFromTheSplitStart) {
  // An index whose merges file has fewer ids (266) than its shards allow (300), every digest
  // right: id 280 in shard 2 of train is refused when the shards are opened, naming the split
  // and the position over its shards (700 + 1 tokens before shard 2).
  const BpeTokenizer bpe = BpeTokenizer::train(testing::synthetic_text(3000, 9), 266);
  bpe.save(dir_.file("tokenizer.bpe"));
  const FileDigest merges = digest_file(dir_.file("tokenizer.bpe"));
  index_.tokenizer = "bpe";
  index_.tokenizer_bytes = merges.bytes;
  index_.tokenizer_crc32 = merges.crc32;
  index_.vocab = 300;
  for (SplitIndex* split : {&index_.train, &index_.val}) {
    for (ShardEntry& e : split->shards) {
      std::vector<int32_t> ids = read_token_shard(dir_.file(e.file));
      if (&e == &index_.train.shards[2]) ids[33] = 280;
      write_token_shard(dir_.file(e.file), ids, 300);
      const FileDigest d = digest_file(dir_.file(e.file));
      e.bytes = d.bytes;
      e.crc32 = d.crc32;
    }
  }
  write_index();
  Config c = config(16);
  c.model.vocab = 300;
  expect_throw_mentioning<IoError>(
      [&] { load_training_data(c, RunFolder{dir_.path() + "/run"}); },
      dir_.path() +
          "/train_*.bin: token id 280 at position 734 is outside the vocabulary of "
          "the BPE tokenizer of " +
          dir_.file("tokenizer.bpe") + " (266 ids)");
}

TEST_F(ByteShardFolder, BpeShardsGiveTheStatisticsOfTheirDecodedText) {
  // The same folder re-encoded with merges: tokens of several bytes, so bytes per token and the
  // baseline come from each id's text (shard_baseline.h), against the decoded splits.
  const std::string train_text(train_.begin(), train_.end()), val_text(val_.begin(), val_.end());
  const BpeTokenizer bpe = BpeTokenizer::train(train_text, 400);
  bpe.save(dir_.file("tokenizer.bpe"));
  const FileDigest merges = digest_file(dir_.file("tokenizer.bpe"));
  index_ = TokenShardIndex{};
  index_.tokenizer = "bpe";
  index_.tokenizer_bytes = merges.bytes;
  index_.tokenizer_crc32 = merges.crc32;
  index_.vocab = 400;
  for (const char* split : {"train", "val"}) {
    for (int k = 0; k < 5; ++k) std::filesystem::remove(dir_.file(shard_file_name(split, k)));
  }
  const std::vector<int32_t> train = bpe.encode(train_text), val = bpe.encode(val_text);
  ASSERT_LT(train.size() * 4, train_text.size() * 3) << "merges that shorten the text";
  for (const auto& [ids, split, out] :
       {std::tuple{&train, "train", &index_.train}, std::tuple{&val, "val", &index_.val}}) {
    const int64_t n = static_cast<int64_t>(ids->size());
    for (int64_t at = 0, k = 0; at < n; at += 333, ++k) {
      ShardEntry e;
      e.file = shard_file_name(split, k);
      e.tokens = std::min<int64_t>(333, n - at);
      write_token_shard(dir_.file(e.file), std::span(*ids).subspan(at, e.tokens), 400);
      const FileDigest d = digest_file(dir_.file(e.file));
      e.bytes = d.bytes;
      e.crc32 = d.crc32;
      out->shards.push_back(e);
    }
  }
  write_index();
  Config c = config(16);
  c.model.vocab = 400;
  const TrainingData data = load_training_data(c, RunFolder{dir_.path() + "/run"});
  expect_same_examples(*data.train, TokenDataset(train, 16), 16, "bpe train");
  EXPECT_EQ(bpe.decode(train), train_text);
  EXPECT_EQ(data.unigram_bits_per_byte, unigram_bits_per_byte(train_text, val_text));
  EXPECT_EQ(data.val_bytes_per_token,
            static_cast<double>(val_text.size()) / static_cast<double>(val.size()));
  EXPECT_GT(data.val_bytes_per_token, 1.3);
}

TEST(MappedTokenShard, TheOpeningPassFindsTheFirstIdOverALimitAndCountsTheOthers) {
  TempDir dir;
  std::vector<int32_t> ids = random_ids(3000, 1000, 5);
  for (auto& id : ids) id %= 200;
  ids[1234] = 700;
  ids[2000] = 999;
  write_token_shard(dir.file("a.bin"), ids, 1000);
  std::vector<uint64_t> counts(200);
  const MappedTokenShard shard(dir.file("a.bin"), {.id_limit = 200, .id_counts = &counts});
  EXPECT_EQ(shard.first_id_over_limit().index, 1234);
  EXPECT_EQ(shard.first_id_over_limit().id, 700u);
  std::vector<uint64_t> want(200);
  for (const int32_t id : ids) {
    if (id < 200) ++want[static_cast<size_t>(id)];
  }
  EXPECT_EQ(counts, want);
  // Truncated without an index: the header's count no longer matches the size.
  std::string bytes = testing::read_bytes(dir.file("a.bin"));
  testing::write_bytes(dir.file("a.bin"), bytes.substr(0, bytes.size() - 2));
  expect_throw_mentioning<IoError>([&] { MappedTokenShard s(dir.file("a.bin")); },
                                   dir.file("a.bin") + ": bad token shard: header says 3000");
  testing::write_bytes(dir.file("a.bin"), "");
  expect_throw_mentioning<IoError>([&] { MappedTokenShard s(dir.file("a.bin")); },
                                   dir.file("a.bin") + ": bad token shard: file has 0 bytes");
}

}  // namespace
}  // namespace brigade
