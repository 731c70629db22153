#pragma once
// Instruction data for a GPT: each (prompt, response) record is one example whose loss covers
// the response only.
//
// Example k is the token sequence S = encode(prompt) ++ encode(response) ++ encode(kDocSeparator)
// (the separator marks the end of the answer, so the model learns where to stop), cut to T + 1
// tokens. Inputs are S[0, T) and targets S[1, T + 1), next-token prediction as in TokenDataset,
// except that a target is -1 (ignored by the GPT loss) where it is a prompt token or lies past
// the end of S; inputs past the end of S are kInstructionPad. A position's loss only reads
// earlier inputs (causal attention), so padding never changes the loss of a response token.
// A prompt of T + 1 tokens or more leaves an example without targets; it is counted
// (examples_without_targets) and contributes nothing. Only the cut sequences are stored (4 bytes
// a token, no padding); fill() lays out inputs and masked targets from them.
#include <cstdint>
#include <vector>

#include "brigade/data/jsonl_corpus.h"
#include "brigade/data/loader.h"
#include "brigade/data/tokenizer.h"

namespace brigade {

inline constexpr int32_t kInstructionPad = 0;

class InstructionDataset final : public Dataset {
 public:
  // ConfigError naming data.seq_len if seq_len <= 0, if records is empty or if no example keeps
  // a response target (every prompt fills the context); `what` names the split in the message.
  InstructionDataset(const std::vector<InstructionRecord>& records, const Tokenizer& tokenizer,
                     int64_t seq_len, const std::string& what);

  int64_t size() const override { return static_cast<int64_t>(prompt_.size()); }
  int64_t seq_len() const { return seq_len_; }

  // batch.tokens and batch.targets are (max_batch, T).
  Batch make_batch(int64_t max_batch) const override;
  void fill(Batch& batch, const int64_t* example_ids, int64_t n) const override;

  bool masks_targets() const override { return true; }
  int64_t valid_targets(int64_t id) const override { return valid_[static_cast<size_t>(id)]; }

  int64_t total_targets() const { return total_targets_; }
  int64_t examples_truncated() const { return truncated_; }  // S longer than T + 1
  int64_t examples_without_targets() const { return without_targets_; }

 private:
  int64_t seq_len_;
  std::vector<int32_t> tokens_;  // every example's cut sequence S, one after another
  std::vector<int64_t> offset_;  // (N + 1) example k is tokens_[offset_[k], offset_[k + 1])
  std::vector<int64_t> prompt_;  // (N) prompt tokens of example k (may exceed its S)
  std::vector<int64_t> valid_;   // (N) targets >= 0 per example
  int64_t total_targets_ = 0;
  int64_t truncated_ = 0;
  int64_t without_targets_ = 0;
};

}  // namespace brigade
