#pragma once
// Learning-rate schedule: linear warmup, then cosine decay to min_lr (as in GPT-2/3 and
// llm.c). With 0-based step s, W = warmup, N = total:
//   s <  W:       lr = max_lr * (s + 1) / W       (never 0, so step 0 already learns)
//   W <= s < N:   lr = min_lr + 0.5 (max_lr - min_lr) (1 + cos(pi (s - W) / (N - W)))
//   s >= N:       lr = min_lr
// total = 0 means no decay: max_lr after warmup.
#include <cstdint>

namespace brigade {

struct LrSchedule {
  float max_lr = 3e-4f;  // peak, reached at step warmup - 1 (or 0 without warmup); > 0
  float min_lr = 3e-5f;  // floor of the cosine, in [0, max_lr]
  int64_t warmup = 0;    // warmup steps, >= 0
  int64_t total = 0;     // step where the cosine reaches min_lr; 0 or >= warmup
  // Throws ConfigError naming the key ("lr.warmup"), the value and what is allowed.
  void validate() const;
};

// The learning rate of 0-based step `step` (formula above).
float lr_at(const LrSchedule& schedule, int64_t step);

}  // namespace brigade
