#include "brigade/data/streamed_token_dataset.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

StreamedTokenDataset::StreamedTokenDataset(std::vector<MappedTokenShard> shards, int64_t seq_len)
    : shards_(std::move(shards)), seq_len_(seq_len) {
  starts_.reserve(shards_.size() + 1);
  starts_.push_back(0);
  for (const MappedTokenShard& s : shards_) starts_.push_back(starts_.back() + s.num_tokens());
  const int64_t n = starts_.back();
  if (seq_len <= 0 || n < seq_len + 1) {
    throw ConfigError("token dataset: seq_len = " + std::to_string(seq_len) + " needs > 0 and " +
                      "at least seq_len + 1 tokens, have " + std::to_string(n));
  }
  num_examples_ = (n - 1) / seq_len;
}

template <typename F>
void StreamedTokenDataset::for_each_piece(int64_t first, int64_t n, F&& f) const {
  BRIGADE_CHECK(first >= 0 && n >= 0 && first + n <= num_tokens())
      << "tokens [" << first << ", " << first + n << ") of " << num_tokens();
  // The last shard starting at or before `first` (empty shards share their successor's start).
  size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), first) -
                                 starts_.begin()) -
             1;
  for (int64_t done = 0; done < n; ++k) {
    const int64_t at = first + done;
    const int64_t take = std::min(n - done, starts_[k + 1] - at);
    if (take > 0) {
      f(shards_[k], at - starts_[k], take, done);
      done += take;
    }
  }
}

void StreamedTokenDataset::copy_tokens(int64_t first, int64_t n, int32_t* out) const {
  for_each_piece(first, n, [&](const MappedTokenShard& s, int64_t at, int64_t take, int64_t done) {
    s.copy(at, take, out + done);
    s.release(at, take);
  });
}

Batch StreamedTokenDataset::make_batch(int64_t max_batch) const {
  return make_sequence_batch(max_batch, seq_len_);
}

void StreamedTokenDataset::fill(Batch& batch, const int64_t* example_ids, int64_t n) const {
  const int64_t t = seq_len_;
  check_sequence_batch(batch, n, t);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = example_ids[b];
    BRIGADE_CHECK(id >= 0 && id < num_examples_) << "example " << id << " of " << num_examples_;
    // Window [id*T, id*T + T + 1): inputs its first T tokens, targets its last T.
    int32_t* tokens = batch.tokens.data() + b * t;
    int32_t* targets = batch.targets.data() + b * t;
    for_each_piece(id * t, t + 1,
                   [&](const MappedTokenShard& s, int64_t at, int64_t take, int64_t done) {
                     // Tokens [0, T) of the window are inputs, its last token the last target.
                     const int64_t inputs = std::min(take, t - done);
                     s.copy(at, inputs, tokens + done);
                     if (inputs < take) s.copy(at + inputs, 1, targets + t - 1);
                     s.release(at, take);
                   });
    std::memcpy(targets, tokens + 1, sizeof(int32_t) * (t - 1));
  }
  batch.size = n;
  batch.seq_len = t;
}

}  // namespace brigade
