#include "brigade/monitor/step_breakdown.h"

#include <algorithm>

namespace brigade {

void StepBreakdown::attribute_wait(double busy_s, double slowest_busy_s) {
  const double skew = std::clamp(slowest_busy_s - busy_s, 0.0, comm_s);
  wait_s += skew;
  comm_s -= skew;
}

void StepBreakdown::add_to(nlohmann::json& rec, double step_s) const {
  const double parts[] = {data_s, compute_s, comm_s, wait_s, bubble_s, checkpoint_s, eval_s};
  const char* names[] = {"time_data_ms",   "time_compute_ms",    "time_comm_ms", "time_wait_ms",
                         "time_bubble_ms", "time_checkpoint_ms", "time_eval_ms"};
  double sum = 0;
  for (size_t i = 0; i < std::size(parts); ++i) {
    rec[names[i]] = parts[i] * 1e3;
    sum += parts[i];
  }
  rec["time_other_ms"] = std::max(0.0, step_s - sum) * 1e3;
}

}  // namespace brigade
