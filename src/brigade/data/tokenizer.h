#pragma once
// What a run needs from a tokenizer: text bytes in, token ids in [0, vocab_size()) out, and
// back. Implementations: ByteTokenizer (one token per byte) and BpeTokenizer (learned merges).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Number of distinct token ids; every id produced by encode() is below it.
  virtual int32_t vocab_size() const = 0;

  // Lossless: decode(encode(text)) == text for every byte string, including invalid UTF-8.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;

  // Concatenates the bytes of each token. Ids come from files (token shards) and models, so an
  // id outside [0, vocab_size()) is an IoError naming the first one and its position, not an
  // abort; callers that know the file check with first_out_of_vocab() first to name it.
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
};

// The position of the first id outside [0, vocab_size) in tokens, or -1 if there is none.
inline int64_t first_out_of_vocab(std::span<const int32_t> tokens, int32_t vocab_size) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) return static_cast<int64_t>(i);
  }
  return -1;
}

// Throws IoError "<what>: token id X at position i is outside the tokenizer's vocabulary of N
// ids" unless every id is in [0, vocab_size).
void require_in_vocab(std::span<const int32_t> tokens, int32_t vocab_size, const std::string& what);

}  // namespace brigade
