#include "brigade/train/straggler_watch.h"

#include <algorithm>
#include <cmath>

#include "brigade/sync/lowcomm/common.h"

namespace brigade {

StragglerWatch::StragglerWatch(Communicator* world, double threshold, bool every_step, Log& log)
    : world_(world), log_(log) {
  if (!world_ || world_->size() < 2 || threshold == 0 || !every_step) return;
  const int n = world_->size();
  detector_.emplace(n, StragglerOptions{.threshold = threshold});
  times_.assign(static_cast<size_t>(n), 0.0f);
  busy_sum_s_.assign(static_cast<size_t>(n), 0.0);
  was_flagged_.assign(static_cast<size_t>(n), 0);
}

Traffic StragglerWatch::observe(int64_t step, double busy_s, bool stop_requested) {
  if (!detector_) return {};
  mine_ = static_cast<float>(busy_s);
  // The sign bit says "asked to stop" (copysign also marks a busy time of 0, as -0).
  float sent = std::copysign(std::fabs(mine_), stop_requested ? -1.0f : 1.0f);
  world_->all_gather(&sent, times_.data(), 1);
  stop_by_any_ = false;
  for (float& t : times_) {
    stop_by_any_ |= std::signbit(t);
    t = std::fabs(t);
  }
  const StragglerReport r = detector_->observe(times_);
  ++steps_;
  for (size_t i = 0; i < times_.size(); ++i) busy_sum_s_[i] += times_[i];
  max_ratio_ = r.max_ratio;
  straggler_rank_ = r.straggler_rank;
  // Flag changes: rank 0 reports them (every rank has the same verdict).
  size_t k = 0;
  for (int rank = 0; rank < static_cast<int>(was_flagged_.size()); ++rank) {
    const bool now = k < r.flagged.size() && r.flagged[k] == rank;
    if (now) ++k;
    if (now == static_cast<bool>(was_flagged_[static_cast<size_t>(rank)])) continue;
    was_flagged_[static_cast<size_t>(rank)] = now;
    if (log_.rank() != 0) continue;
    if (now) {
      log_.info(
          "straggler: rank {} flagged at step {} ({:.0f} ms busy, {:.2f}x the median {:.0f} ms)",
          rank, step, times_[static_cast<size_t>(rank)] * 1e3, r.ratio[static_cast<size_t>(rank)],
          r.median * 1e3);
    } else {
      log_.info("straggler: rank {} cleared at step {} ({:.2f}x the median)", rank, step,
                r.ratio[static_cast<size_t>(rank)]);
    }
  }
  return all_gather_equal_traffic(sizeof(float), world_->size(), world_->rank());
}

void StragglerWatch::add_step_metrics(nlohmann::json& rec) const {
  if (!detector_) return;
  rec["straggler_max_ratio"] = max_ratio_;
  if (straggler_rank_ >= 0) rec["straggler_rank"] = straggler_rank_;
  // This rank's busy time and the step's extremes: waiting after one's own backward is
  // (busy_ms_max - busy_ms) for the slowest rank plus whatever communication is left exposed.
  rec["busy_ms"] = mine_ * 1e3;
  rec["busy_ms_max"] = *std::max_element(times_.begin(), times_.end()) * 1e3;
  rec["busy_ms_min"] = *std::min_element(times_.begin(), times_.end()) * 1e3;
}

void StragglerWatch::add_summary(nlohmann::json& summary) const {
  if (!detector_ || steps_ == 0) return;
  nlohmann::json ms = nlohmann::json::array();
  for (double s : busy_sum_s_) ms.push_back(s / static_cast<double>(steps_) * 1e3);
  summary["busy_ms_per_rank"] = ms;
}

double StragglerWatch::slowest_busy_s() const {
  return times_.empty() ? 0.0 : *std::max_element(times_.begin(), times_.end());
}

}  // namespace brigade
