// Token shards: round trips in both dtypes, the header layout checked byte by byte, and every
// kind of corruption rejected with an IoError that names the file.
#include "brigade/data/token_shard.h"

#include <gtest/gtest.h>

#include <random>

#include "brigade/base/error.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;

std::vector<int32_t> random_tokens(size_t n, uint32_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(gen() % vocab);
  if (n >= 2) t[0] = 0, t[1] = static_cast<int32_t>(vocab - 1);  // both ends of the range
  return t;
}

uint64_t le(const std::string& b, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(b[off + i])} << (8 * i);
  return v;
}

void put_le(std::string& b, size_t off, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[off + i] = static_cast<char>(v >> (8 * i));
}

TEST(TokenShard, RoundTripUint16) {
  testing::TempDir dir;
  const std::string path = dir.file("train.bin");
  const auto tokens = random_tokens(10007, 50257, 1);
  write_token_shard(path, tokens, 50257);
  const std::string raw = testing::read_bytes(path);
  // Independent look at the layout: header, then 2 little-endian bytes per token.
  ASSERT_EQ(raw.size(), 64u + 2u * tokens.size());
  EXPECT_EQ(raw.substr(0, 8), "BRGDTOK1");
  EXPECT_EQ(le(raw, 8, 4), kTokenShardVersion);
  EXPECT_EQ(le(raw, 12, 4), 2u);
  EXPECT_EQ(le(raw, 16, 8), tokens.size());
  EXPECT_EQ(le(raw, 24, 4), 50257u);
  for (size_t i = 28; i < 64; ++i) EXPECT_EQ(raw[i], 0) << i;
  EXPECT_EQ(le(raw, 64 + 2 * 5, 2), static_cast<uint64_t>(tokens[5]));

  TokenShardInfo info;
  EXPECT_EQ(read_token_shard(path, &info), tokens);
  EXPECT_EQ(info.dtype_bytes, 2u);
  EXPECT_EQ(info.num_tokens, tokens.size());
  EXPECT_EQ(info.vocab_size, 50257u);
  const TokenShardInfo header = read_token_shard_info(path);
  EXPECT_EQ(header.num_tokens, tokens.size());
  // No temporary file is left behind by the atomic write.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(TokenShard, RoundTripUint32AndTheDtypeBoundary) {
  testing::TempDir dir;
  const std::string path = dir.file("big-vocab.bin");
  const auto tokens = random_tokens(5003, 100000, 2);
  write_token_shard(path, tokens, 100000);
  EXPECT_EQ(testing::read_bytes(path).size(), 64u + 4u * tokens.size());
  TokenShardInfo info;
  EXPECT_EQ(read_token_shard(path, &info), tokens);
  EXPECT_EQ(info.dtype_bytes, 4u);

  // 65536 still fits uint16 (ids 0..65535); 65537 does not.
  write_token_shard(path, random_tokens(100, 65536, 3), 65536);
  EXPECT_EQ(read_token_shard_info(path).dtype_bytes, 2u);
  write_token_shard(path, random_tokens(100, 65537, 3), 65537);
  EXPECT_EQ(read_token_shard_info(path).dtype_bytes, 4u);
  EXPECT_EQ(read_token_shard(path), random_tokens(100, 65537, 3));

  write_token_shard(path, {}, 256);
  EXPECT_TRUE(read_token_shard(path).empty());
}

TEST(TokenShard, CorruptFilesThrowIoErrorNamingThePath) {
  testing::TempDir dir;
  const std::string good_path = dir.file("good.bin");
  const auto tokens = random_tokens(1000, 512, 4);
  write_token_shard(good_path, tokens, 512);
  const std::string good = testing::read_bytes(good_path);

  auto corrupt = [&](const char* name, std::string bytes) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(std::string(name) + ".bin");
    testing::write_bytes(path, bytes);
    expect_throw_mentioning<IoError>([&] { read_token_shard(path); }, path);
  };
  std::string b = good;
  b[0] = 'X';
  corrupt("wrong-magic", b);
  b = good;
  put_le(b, 8, 2, 4);
  corrupt("wrong-version", b);
  b = good;
  put_le(b, 12, 3, 4);
  corrupt("wrong-dtype", b);
  b = good;
  put_le(b, 24, 70000, 4);  // does not fit uint16
  corrupt("vocab-too-big-for-dtype", b);
  corrupt("truncated", good.substr(0, good.size() - 1));
  corrupt("truncated-by-a-token", good.substr(0, good.size() - 2));
  corrupt("trailing-bytes", good + std::string(2, '\0'));
  corrupt("shorter-than-header", good.substr(0, 10));
  corrupt("empty", "");
  b = good;
  put_le(b, 16, uint64_t{1} << 63, 8);  // a count that would overflow count * dtype
  corrupt("huge-count", b);
  b = good;
  put_le(b, 64 + 2 * 777, 512, 2);  // == vocab
  corrupt("token-equals-vocab", b);
  b = good;
  put_le(b, 64 + 2 * 3, 65535, 2);
  corrupt("token-above-vocab", b);

  const std::string missing = dir.file("missing.bin");
  expect_throw_mentioning<IoError>([&] { read_token_shard(missing); }, missing);
  expect_throw_mentioning<IoError>([&] { read_token_shard_info(missing); }, missing);
  // The header-only reader checks sizes too.
  const std::string cut = dir.file("cut.bin");
  testing::write_bytes(cut, good.substr(0, 100));
  expect_throw_mentioning<IoError>([&] { read_token_shard_info(cut); }, cut);
}

TEST(TokenShardDeathTest, WritingATokenOutsideTheVocabIsAProgrammerError) {
  testing::TempDir dir;
  EXPECT_DEATH(write_token_shard(dir.file("x.bin"), std::vector<int32_t>{1, 300}, 256),
               "outside vocab");
}

}  // namespace
}  // namespace brigade
