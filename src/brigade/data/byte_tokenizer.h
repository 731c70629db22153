#pragma once
// The simplest lossless tokenizer: token id = byte value, vocabulary 256. No training, no file.
#include "brigade/data/tokenizer.h"

namespace brigade {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kVocabSize = 256;

  int32_t vocab_size() const override { return kVocabSize; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out(text.size());
    for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
    return out;
  }

  std::string decode(std::span<const int32_t> tokens) const override {
    require_in_vocab(tokens, kVocabSize, "byte tokenizer");
    std::string out(tokens.size(), '\0');
    for (size_t i = 0; i < tokens.size(); ++i) {
      out[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
    }
    return out;
  }
};

}  // namespace brigade
