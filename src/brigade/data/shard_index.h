#pragma once
// The index of a tokenized corpus folder, as `brigade tokenize` writes it and
// data.source = "shards" reads it:
//
//   tokenizer.bpe                      the BPE merges (absent: byte tokens)
//   train_000000.bin, train_000001.bin the train split's token shards (data/token_shard.h), in
//   order val_000000.bin, ...                the validation split's index.json written last: every
//   shard with its size and CRC-32
//
// index.json: {"format": 1, "tokenizer": "bpe" | "byte", "tokenizer_bytes": n,
// "tokenizer_crc32": "0x1234abcd" (bpe only), "vocab": V, "val_fraction": f,
// "shard_text_bytes": S, "splits": {"train": {"docs", "text_bytes", "tokens", "shards": [{"file",
// "docs", "text_bytes", "tokens", "bytes", "crc32"}, ...]}, "val": {...}}}. A split's token
// sequence is its shards' tokens concatenated. A folder without index.json is not a finished
// output: the reader refuses it rather than read shards that a stopped run left behind.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/data/mapped_token_shard.h"

namespace brigade {

inline constexpr const char* kShardIndexFile = "index.json";
inline constexpr int kShardIndexFormat = 1;
// Six-digit shard numbers.
inline constexpr int64_t kMaxShardsPerSplit = 1'000'000;
inline constexpr int64_t kMaxShardIndexBytes = int64_t{1} << 28;

struct ShardEntry {
  std::string file;  // shard_file_name(split, its position)
  int64_t docs = 0;
  int64_t text_bytes = 0;  // the text it encodes, separators included
  int64_t tokens = 0;
  int64_t bytes = 0;  // the file's size
  uint32_t crc32 = 0;
  bool operator==(const ShardEntry&) const = default;
};

struct SplitIndex {
  std::vector<ShardEntry> shards;
  int64_t docs() const;
  int64_t text_bytes() const;
  int64_t tokens() const;
};

struct TokenShardIndex {
  std::string tokenizer = "byte";  // "bpe" or "byte"
  int64_t tokenizer_bytes = 0;     // bpe: size and CRC-32 of tokenizer.bpe
  uint32_t tokenizer_crc32 = 0;
  uint32_t vocab = 256;
  double val_fraction = 0;
  int64_t shard_text_bytes = 0;
  SplitIndex train;
  SplitIndex val;
};

// "train_000042.bin" for split "train", number 42.
std::string shard_file_name(std::string_view split, int64_t number);

// Whether name is one of the files `brigade tokenize` writes (index, tokenizer, shards old and
// numbered) or their temporary files: what a new run clears first.
bool is_tokenize_output_name(std::string_view name);

// Whether dir holds numbered shards or their temporary files.
bool has_numbered_shards(const std::string& dir);

// The index as JSON text; a function of its fields only.
std::string shard_index_json(const TokenShardIndex& index);

// Parses and validates index text (path names it in messages): the format, every field's type
// and range, shard names in order, each shard's size against its token count and the vocabulary,
// at most kMaxShardsPerSplit shards. IoError naming path and the field otherwise.
TokenShardIndex parse_shard_index(std::string_view text, const std::string& path);

// What the opening pass over a split's shards also looks for (mapped_token_shard.h): the first
// id >= id_limit of each shard (0: none beyond the index's vocabulary), and counts per id.
struct SplitScan {
  uint64_t id_limit = 0;
  std::vector<uint64_t>* id_counts = nullptr;  // id_limit entries, or null
};

struct IndexedShardFiles {
  TokenShardIndex index;
  std::vector<MappedTokenShard> train;  // in index order; a split is their tokens concatenated
  std::vector<MappedTokenShard> val;
  std::vector<std::string> files;  // the index, the tokenizer (bpe) and every shard, as read
};

// Reads dir/index.json and maps everything it lists, without holding the tokens: tokenizer.bpe
// must have the recorded size and CRC-32 (and be absent for byte tokens), and every shard its
// size and CRC-32 (checked in one pass over its bytes at open, before its header and ids), token
// count and vocabulary, every id below it. IoError naming the file that is missing or does not
// match: the first in index order, every size checked before any content.
IndexedShardFiles open_indexed_shards(const std::string& dir, const SplitScan& train_scan = {},
                                      const SplitScan& val_scan = {});

struct IndexedSplits {
  TokenShardIndex index;
  std::vector<int32_t> train;
  std::vector<int32_t> val;
  std::vector<std::string> files;  // the index, the tokenizer (bpe) and every shard, as read
};

// open_indexed_shards with the splits read whole into memory (tests and tools on small folders;
// training maps them: data/streamed_token_dataset.h).
IndexedSplits read_indexed_shards(const std::string& dir);

}  // namespace brigade
