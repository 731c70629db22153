#pragma once
// The shape of a GPT-2 model (model.* keys of the config).
#include <cstdint>

namespace brigade {

struct GptConfig {
  int64_t vocab = 256;    // V
  int64_t seq_len = 256;  // T: the context length, also the size of wpe
  int64_t d_model = 256;  // C
  int64_t n_layer = 4;    // L
  int64_t n_head = 4;     // NH; must divide d_model
  // Throws ConfigError naming the field when a value is out of range.
  void validate() const;
};

}  // namespace brigade
