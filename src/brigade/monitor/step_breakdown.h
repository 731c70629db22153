#pragma once
// Where one training step's wall time went, the same parts for every engine, summing to the
// step time (metrics.jsonl "time_*_ms", docs/metrics.md):
//
//   data        filling the step's batches from the loader
//   compute     this rank's forward, backward and optimizer work (tensor-parallel collectives
//               inside the layers included: they cannot be told apart from the matmuls there)
//   comm        waiting for gradient and scalar communication that compute did not hide
//   wait        of that waiting, the part explained by slower ranks: how much longer the
//               slowest rank computed than this one (from the straggler exchange)
//   bubble      pipeline parallelism: this stage idle, waiting for activations or gradients
//   checkpoint  the blocking part of a checkpoint save
//   eval        a validation pass
//   other       the rest (clipping decisions, metrics, the straggler exchange, the log)
#include <nlohmann/json.hpp>

namespace brigade {

struct StepBreakdown {
  double data_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double wait_s = 0;
  double bubble_s = 0;
  double checkpoint_s = 0;
  double eval_s = 0;

  // Moves the part of comm_s that slower ranks explain into wait_s: the slowest rank's busy
  // time minus this rank's, at most all of comm_s.
  void attribute_wait(double busy_s, double slowest_busy_s);
  // Adds time_<part>_ms for every part and time_other_ms = step_s minus their sum (clamped at
  // 0; the parts are measured inside the step, so they never exceed it beyond clock noise).
  void add_to(nlohmann::json& rec, double step_s) const;
};

}  // namespace brigade
