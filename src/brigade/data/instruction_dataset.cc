#include "brigade/data/instruction_dataset.h"

#include <fmt/format.h>

#include <cstring>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/data/text_corpus.h"

namespace brigade {

InstructionDataset::InstructionDataset(const std::vector<InstructionRecord>& records,
                                       const Tokenizer& tokenizer, int64_t seq_len,
                                       const std::string& what)
    : seq_len_(seq_len) {
  if (seq_len <= 0 || records.empty()) {
    throw ConfigError(
        fmt::format("data.seq_len = {}: {} needs a positive context and at least "
                    "one record, has {}",
                    seq_len, what, records.size()));
  }
  const size_t T = static_cast<size_t>(seq_len);
  const size_t N = records.size();
  tokens_.assign(N * T, kInstructionPad);
  targets_.assign(N * T, -1);
  valid_.assign(N, 0);
  const std::vector<int32_t> end = tokenizer.encode(kDocSeparator);
  std::vector<int32_t> seq;
  for (size_t k = 0; k < N; ++k) {
    seq = tokenizer.encode(records[k].prompt);
    const size_t prompt = seq.size();
    const std::vector<int32_t> response = tokenizer.encode(records[k].response);
    seq.insert(seq.end(), response.begin(), response.end());
    seq.insert(seq.end(), end.begin(), end.end());
    if (seq.size() > T + 1) {
      seq.resize(T + 1);
      ++truncated_;
    }
    int32_t* in = tokens_.data() + k * T;
    int32_t* out = targets_.data() + k * T;
    const size_t inputs = std::min(T, seq.size());
    std::memcpy(in, seq.data(), sizeof(int32_t) * inputs);
    // Target t is seq[t + 1]; it counts when seq[t + 1] is past the prompt.
    for (size_t t = prompt == 0 ? 0 : prompt - 1; t + 1 < seq.size(); ++t) {
      out[t] = seq[t + 1];
      ++valid_[k];
    }
    if (valid_[k] == 0) ++without_targets_;
    total_targets_ += valid_[k];
  }
  if (total_targets_ == 0) {
    throw ConfigError(
        fmt::format("data.seq_len = {}: every prompt of {} fills the context, so no "
                    "response token is left to train on",
                    seq_len, what));
  }
}

Batch InstructionDataset::make_batch(int64_t max_batch) const {
  BRIGADE_CHECK(max_batch > 0) << max_batch;
  Batch b;
  b.tokens.assign(static_cast<size_t>(max_batch * seq_len_), 0);
  b.targets.assign(static_cast<size_t>(max_batch * seq_len_), 0);
  b.seq_len = seq_len_;
  return b;
}

void InstructionDataset::fill(Batch& batch, const int64_t* example_ids, int64_t n) const {
  const int64_t t = seq_len_;
  BRIGADE_CHECK(n >= 0 && static_cast<int64_t>(batch.tokens.size()) >= n * t &&
                static_cast<int64_t>(batch.targets.size()) >= n * t)
      << "batch made for fewer than " << n << " examples of length " << t;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = example_ids[b];
    BRIGADE_CHECK(id >= 0 && id < size()) << "example " << id << " of " << size();
    std::memcpy(batch.tokens.data() + b * t, tokens_.data() + id * t, sizeof(int32_t) * t);
    std::memcpy(batch.targets.data() + b * t, targets_.data() + id * t, sizeof(int32_t) * t);
  }
  batch.size = n;
  batch.seq_len = t;
}

}  // namespace brigade
