#pragma once
// A token dataset over many mapped shards (data/mapped_token_shard.h) that never holds the
// tokens: the split is the concatenation of its shards, cut exactly as TokenDataset cuts a
// vector (example i is tokens [i*T, i*T + T + 1) of the concatenation, so a window may cross
// from one shard into the next), and fill() converts each window's T + 1 tokens into the batch.
// Examples, hence losses, are bitwise those of a TokenDataset over the concatenated tokens.
#include <cstdint>
#include <vector>

#include "brigade/data/loader.h"
#include "brigade/data/mapped_token_shard.h"

namespace brigade {

class StreamedTokenDataset final : public Dataset {
 public:
  // N = (total tokens - 1) / seq_len windows. ConfigError if seq_len <= 0 or the shards hold
  // fewer than seq_len + 1 tokens together (TokenDataset's message).
  StreamedTokenDataset(std::vector<MappedTokenShard> shards, int64_t seq_len);

  int64_t size() const override { return num_examples_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_tokens() const { return starts_.back(); }
  const std::vector<MappedTokenShard>& shards() const { return shards_; }

  // Writes tokens [first, first + n) of the concatenation into out (0 <= first, first + n <=
  // num_tokens()), then releases their pages (MappedTokenShard::release). Allocates nothing.
  void copy_tokens(int64_t first, int64_t n, int32_t* out) const;

  // batch.tokens and batch.targets are (max_batch, T).
  Batch make_batch(int64_t max_batch) const override;
  void fill(Batch& batch, const int64_t* example_ids, int64_t n) const override;

 private:
  // Calls f(shard, offset in it, count, offset in the range) for each shard's piece of tokens
  // [first, first + n), in order.
  template <typename F>
  void for_each_piece(int64_t first, int64_t n, F&& f) const;

  std::vector<MappedTokenShard> shards_;
  std::vector<int64_t> starts_;  // starts_[k]: shard k's first token; starts_.back(): the total
  int64_t seq_len_;
  int64_t num_examples_ = 0;
};

}  // namespace brigade
