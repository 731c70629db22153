#pragma once
// Picks the next token from a row of logits: greedy (temperature 0), or a draw from
// softmax(logits / temperature) restricted to the top_k most likely ids and then to the smallest
// set of them whose probability reaches top_p (nucleus sampling, Holtzman et al. 2020), as HF
// `generate` and vLLM apply them. Only ids below `decodable` are candidates: a model's vocabulary
// may be larger than its tokenizer's (padding, or a vocab rounded up), and an id the tokenizer
// cannot decode must never be produced. Draws are counter-based (tensor/rng.h): sequence
// `stream`'s index-th draw depends on nothing else, so a prompt gets the same tokens alone or in
// a batch, on one rank or several.
#include <cstdint>
#include <vector>

namespace brigade {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy
  int64_t top_k = 40;        // 0: every decodable id
  double top_p = 1.0;        // 1: no nucleus cut
  uint64_t seed = 0;
};

// Throws ConfigError naming the option for a value outside its range.
void validate(const SamplingOptions& options);

class TokenSampler {
 public:
  TokenSampler(const SamplingOptions& options, int64_t decodable);
  int32_t sample(const float* logits, uint64_t stream, uint64_t index);

 private:
  SamplingOptions options_;
  int64_t decodable_;
  std::vector<int32_t> order_;  // candidate ids, most likely first
  std::vector<double> probs_;
};

}  // namespace brigade
