#include "brigade/monitor/straggler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

void StragglerOptions::validate() const {
  if (!std::isfinite(threshold) || threshold <= 1.0) {
    throw ConfigError("straggler threshold " + std::to_string(threshold) +
                      ": must be a finite ratio above 1");
  }
  if (consecutive < 1) {
    throw ConfigError("straggler consecutive " + std::to_string(consecutive) +
                      ": must be at least 1 step");
  }
  if (warmup_steps < 0) {
    throw ConfigError("straggler warmup_steps " + std::to_string(warmup_steps) +
                      ": must be 0 or more steps");
  }
}

StragglerDetector::StragglerDetector(int world_size, StragglerOptions options)
    : options_(options),
      ratio_(static_cast<size_t>(world_size)),
      times_(static_cast<size_t>(world_size)),
      scratch_(static_cast<size_t>(world_size)),
      slow_steps_(static_cast<size_t>(world_size), 0) {
  BRIGADE_CHECK(world_size >= 1) << "world_size " << world_size;
  options_.validate();
  flagged_.reserve(static_cast<size_t>(world_size));
}

StragglerReport StragglerDetector::observe(std::span<const float> step_time) {
  const size_t n = ratio_.size();
  BRIGADE_CHECK(step_time.size() == n)
      << "got " << step_time.size() << " times for " << n << " ranks";
  // Times come over the wire: a value that is not a time counts as 0 (never slow) instead of
  // stopping the run over a monitoring number.
  for (size_t r = 0; r < n; ++r) {
    const float t = step_time[r];
    times_[r] = std::isfinite(t) && t >= 0 ? t : 0.0;
    scratch_[r] = times_[r];
  }
  std::sort(scratch_.begin(), scratch_.end());
  const double median =
      n % 2 == 1 ? scratch_[n / 2] : 0.5 * (scratch_[n / 2 - 1] + scratch_[n / 2]);

  const bool warming_up = observed_++ < options_.warmup_steps;
  StragglerReport report;
  report.median = median;
  flagged_.clear();
  for (size_t r = 0; r < n; ++r) {
    ratio_[r] = median > 0 ? times_[r] / median : 1.0;
    if (ratio_[r] > report.max_ratio || report.slowest_rank < 0) {
      report.max_ratio = ratio_[r];
      report.slowest_rank = static_cast<int>(r);
    }
    slow_steps_[r] = !warming_up && ratio_[r] >= options_.threshold ? slow_steps_[r] + 1 : 0;
    if (slow_steps_[r] >= options_.consecutive) {
      flagged_.push_back(static_cast<int>(r));
      if (report.straggler_rank < 0 ||
          ratio_[r] > ratio_[static_cast<size_t>(report.straggler_rank)]) {
        report.straggler_rank = static_cast<int>(r);
      }
    }
  }
  report.ratio = ratio_;
  report.flagged = flagged_;
  return report;
}

}  // namespace brigade
