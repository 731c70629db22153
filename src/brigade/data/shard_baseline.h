#pragma once
// The text statistics of a tokenized split without decoding it whole: bytes per token of the
// validation split, and the unigram baseline (train/training_data.h unigram_bits_per_byte) of
// the validation bytes under the train split's byte frequencies. Both are the doubles that
// decoding the splits whole gives: the same integer counts, then the same sum in the same order.
#include <cstdint>
#include <span>

#include "brigade/data/streamed_token_dataset.h"
#include "brigade/data/tokenizer.h"

namespace brigade {

struct ShardTextStats {
  int64_t train_bytes = 0;  // decode(train).size()
  int64_t val_bytes = 0;    // decode(val).size()
  double unigram_bits_per_byte = 0;
};

// train_id_counts[id]: occurrences of each id in the train split (tokenizer.vocab_size()
// entries, as MappedTokenShard's opening pass counts them); val: the validation split, read
// once in order. Every id must be below the tokenizer's vocabulary (checked at open).
ShardTextStats shard_text_stats(const Tokenizer& tokenizer,
                                std::span<const uint64_t> train_id_counts,
                                const StreamedTokenDataset& val);

}  // namespace brigade
