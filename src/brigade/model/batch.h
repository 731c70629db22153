#pragma once
// One micro-batch as a model consumes it. The buffers are sized once (for the largest
// micro-batch) and refilled in place by the data loader every step.
#include <cstdint>
#include <vector>

namespace brigade {

struct Batch {
  int64_t size = 0;              // examples in this micro-batch
  int64_t seq_len = 0;           // GPT: tokens per example; 0 means the model's context length
  std::vector<int32_t> tokens;   // GPT: (size, T) input tokens
  std::vector<int32_t> targets;  // GPT: (size, T) next tokens; classifier: (size) labels
  std::vector<float> features;   // classifier: (size, D) inputs
};

}  // namespace brigade
