#include "brigade/data/instruction_dataset.h"

#include <fmt/format.h>

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/data/text_corpus.h"

namespace brigade {

InstructionDataset::InstructionDataset(const std::vector<InstructionRecord>& records,
                                       const Tokenizer& tokenizer, int64_t seq_len,
                                       const std::string& what)
    : seq_len_(seq_len) {
  if (seq_len <= 0 || records.empty()) {
    throw ConfigError(fmt::format(
        "data.seq_len = {}: {} needs a positive context and at least one record, has {}", seq_len,
        what, records.size()));
  }
  const size_t T = static_cast<size_t>(seq_len);
  const size_t N = records.size();
  offset_.assign(N + 1, 0);
  prompt_.assign(N, 0);
  valid_.assign(N, 0);
  const std::vector<int32_t> end = tokenizer.encode(kDocSeparator);
  for (size_t k = 0; k < N; ++k) {
    const std::vector<int32_t> prompt = tokenizer.encode(records[k].prompt);
    const std::vector<int32_t> response = tokenizer.encode(records[k].response);
    const size_t full = prompt.size() + response.size() + end.size();
    const size_t kept = std::min(full, T + 1);
    if (full > kept) ++truncated_;
    // S = prompt ++ response ++ end, cut to `kept` tokens.
    size_t left = kept;
    for (const std::vector<int32_t>* part : {&prompt, &response, &end}) {
      const size_t n = std::min(left, part->size());
      tokens_.insert(tokens_.end(), part->begin(), part->begin() + static_cast<ptrdiff_t>(n));
      left -= n;
    }
    offset_[k + 1] = static_cast<int64_t>(tokens_.size());
    prompt_[k] = static_cast<int64_t>(prompt.size());
    // Targets are S[1..kept); those at index >= max(prompt, 1) count.
    const size_t first = std::max<size_t>(prompt.size(), 1);
    valid_[k] = kept > first ? static_cast<int64_t>(kept - first) : 0;
    if (valid_[k] == 0) ++without_targets_;
    total_targets_ += valid_[k];
  }
  if (total_targets_ == 0) {
    throw ConfigError(fmt::format(
        "data.seq_len = {}: every prompt of {} fills the context, so no response token is left "
        "to train on",
        seq_len, what));
  }
}

Batch InstructionDataset::make_batch(int64_t max_batch) const {
  return make_sequence_batch(max_batch, seq_len_);
}

void InstructionDataset::fill(Batch& batch, const int64_t* example_ids, int64_t n) const {
  const int64_t t = seq_len_;
  check_sequence_batch(batch, n, t);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = example_ids[b];
    BRIGADE_CHECK(id >= 0 && id < size()) << "example " << id << " of " << size();
    const int32_t* seq = tokens_.data() + offset_[id];
    const int64_t len = offset_[id + 1] - offset_[id];  // at most T + 1
    const int64_t prompt = prompt_[id];
    int32_t* in = batch.tokens.data() + b * t;
    int32_t* out = batch.targets.data() + b * t;
    for (int64_t i = 0; i < t; ++i) {
      in[i] = i < len ? seq[i] : kInstructionPad;
      out[i] = i + 1 < len && i + 1 >= prompt ? seq[i + 1] : -1;
    }
  }
  batch.size = n;
  batch.seq_len = t;
}

}  // namespace brigade
