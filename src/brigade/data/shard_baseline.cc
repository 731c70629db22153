#include "brigade/data/shard_baseline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "brigade/base/check.h"

namespace brigade {

ShardTextStats shard_text_stats(const Tokenizer& tokenizer,
                                std::span<const uint64_t> train_id_counts,
                                const StreamedTokenDataset& val) {
  const int32_t vocab = tokenizer.vocab_size();
  BRIGADE_CHECK(static_cast<int64_t>(train_id_counts.size()) == vocab)
      << train_id_counts.size() << " counts for a vocabulary of " << vocab;
  // decode() concatenates the bytes of each token (tokenizer.h), so a split's text is its
  // tokens' texts in order.
  std::vector<std::string> text_of(static_cast<size_t>(vocab));
  for (int32_t id = 0; id < vocab; ++id)
    text_of[static_cast<size_t>(id)] = tokenizer.decode({&id, 1});

  // Byte counts of the train text: integers, so the doubles below are exact as long as a count
  // stays under 2^53, as the += 1.0 per byte of the whole-text version is.
  std::array<uint64_t, 256> byte_counts{};
  ShardTextStats stats;
  for (int32_t id = 0; id < vocab; ++id) {
    const uint64_t n = train_id_counts[static_cast<size_t>(id)];
    if (n == 0) continue;
    for (unsigned char c : text_of[static_cast<size_t>(id)]) byte_counts[c] += n;
    stats.train_bytes += static_cast<int64_t>(n * text_of[static_cast<size_t>(id)].size());
  }
  // unigram_bits_per_byte(train_text, val_text), term by term.
  std::array<double, 256> log2p{};
  const double total = static_cast<double>(stats.train_bytes) + 256.0;
  for (int c = 0; c < 256; ++c) {
    log2p[static_cast<size_t>(c)] =
        std::log2((1.0 + static_cast<double>(byte_counts[static_cast<size_t>(c)])) / total);
  }
  double bits = 0;
  std::vector<int32_t> chunk(size_t{1} << 16);
  for (int64_t first = 0; first < val.num_tokens();) {
    const int64_t n =
        std::min<int64_t>(static_cast<int64_t>(chunk.size()), val.num_tokens() - first);
    val.copy_tokens(first, n, chunk.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::string& text = text_of[static_cast<size_t>(chunk[static_cast<size_t>(i)])];
      for (unsigned char c : text) bits -= log2p[c];
      stats.val_bytes += static_cast<int64_t>(text.size());
    }
    first += n;
  }
  stats.unigram_bits_per_byte =
      stats.val_bytes == 0 ? 0.0 : bits / static_cast<double>(stats.val_bytes);
  return stats;
}

}  // namespace brigade
