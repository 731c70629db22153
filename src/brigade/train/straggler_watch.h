#pragma once
// The training loop's straggler detection (monitor/straggler.h). Each step every rank
// contributes its own busy time (compute before waiting for the others, StepGradients::busy_s)
// to one all-gather of a float per rank over the world communicator, and every rank feeds the
// same vector to its StragglerDetector, so all reach the same verdict.
//
// Why an all-gather of its own: the per-step collectives the loop already has are all-reduces
// of a loss and a squared norm, which cannot carry per-rank values; an all-gather of 4 bytes per
// rank is world - 1 rounds of one float, the cheapest exchange that can. Its bytes are counted
// in the step's comm_* metrics and, through step traffic, in ReplicaSync's byte formulas.
// It is skipped where ranks must not wait for each other (DiLoCo with sync.quorum < 1).
//
// The same exchange lets the ranks agree on stopping after a SIGINT/SIGTERM (runtime/interrupt.h)
// at no extra cost: a rank that was asked to stop sends its busy time with the sign bit set, so
// every rank learns in the same step that one was, and all save and stop at that step.
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/wire_traffic.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/straggler.h"

namespace brigade {

class StragglerWatch {
 public:
  // Disabled (every call a no-op) for one process, for threshold 0 (train.straggler_threshold)
  // and when !every_step. log: rank 0's gets a line when a rank is first flagged or cleared.
  StragglerWatch(Communicator* world, double threshold, bool every_step, Log& log);

  bool enabled() const { return detector_.has_value(); }

  // Collective over world: shares this rank's busy seconds of the step and whether it was asked
  // to stop, and updates the verdict. Returns the exchange's traffic by formula (nothing when
  // disabled).
  Traffic observe(int64_t step, double busy_s, bool stop_requested = false);
  // Whether some rank had been asked to stop in the last observed step.
  bool stop_requested_by_any() const { return stop_by_any_; }
  // Adds "straggler_max_ratio" (and "straggler_rank" while one is flagged), this rank's
  // "busy_ms" and the step's slowest and fastest ranks' ("busy_ms_max", "busy_ms_min").
  void add_step_metrics(nlohmann::json& rec) const;
  // The slowest rank's busy seconds of the last observed step, and every rank's.
  double slowest_busy_s() const;
  const std::vector<float>& busy_s_per_rank() const { return times_; }
  // Adds "busy_ms_per_rank": each rank's mean busy time per step over this invocation.
  void add_summary(nlohmann::json& summary) const;

 private:
  Communicator* world_;
  Log& log_;
  std::optional<StragglerDetector> detector_;
  float mine_ = 0;
  std::vector<float> times_;        // this step's, per rank (seconds)
  std::vector<double> busy_sum_s_;  // per rank, over this invocation's steps
  std::vector<char> was_flagged_;   // per rank, after the previous step
  int64_t steps_ = 0;
  double max_ratio_ = 0;
  int straggler_rank_ = -1;
  bool stop_by_any_ = false;
};

}  // namespace brigade
