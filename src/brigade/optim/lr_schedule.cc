#include "brigade/optim/lr_schedule.h"

#include <cmath>
#include <string>

#include "brigade/base/error.h"

namespace brigade {

void LrSchedule::validate() const {
  if (!(max_lr > 0.0f) || !std::isfinite(max_lr))
    throw ConfigError("lr.max_lr = " + std::to_string(max_lr) + ": must be > 0");
  if (!(min_lr >= 0.0f && min_lr <= max_lr))
    throw ConfigError("lr.min_lr = " + std::to_string(min_lr) +
                      ": must be in [0, lr.max_lr = " + std::to_string(max_lr) + "]");
  if (warmup < 0) throw ConfigError("lr.warmup = " + std::to_string(warmup) + ": must be >= 0");
  if (total != 0 && total < warmup)
    throw ConfigError("lr.total = " + std::to_string(total) +
                      ": must be 0 (no decay) or >= " + "lr.warmup = " + std::to_string(warmup));
}

float lr_at(const LrSchedule& s, int64_t step) {
  if (step < s.warmup)
    return s.max_lr * static_cast<float>(step + 1) / static_cast<float>(s.warmup);
  if (s.total == 0) return s.max_lr;
  if (step >= s.total) return s.min_lr;
  const double progress =
      static_cast<double>(step - s.warmup) / static_cast<double>(s.total - s.warmup);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return static_cast<float>(s.min_lr + cosine * (static_cast<double>(s.max_lr) - s.min_lr));
}

}  // namespace brigade
