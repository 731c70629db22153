#include "brigade/data/tokenizer.h"

#include "brigade/base/error.h"

namespace brigade {

void require_in_vocab(std::span<const int32_t> tokens, int32_t vocab_size,
                      const std::string& what) {
  const int64_t i = first_out_of_vocab(tokens, vocab_size);
  if (i < 0) return;
  throw IoError(what + ": token id " + std::to_string(tokens[static_cast<size_t>(i)]) +
                " at position " + std::to_string(i) + " is outside the tokenizer's vocabulary of " +
                std::to_string(vocab_size) + " ids");
}

}  // namespace brigade
