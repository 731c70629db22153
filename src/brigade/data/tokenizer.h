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

  // Concatenates the bytes of each token. Every id must be in [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
};

}  // namespace brigade
