#pragma once
// Straggler detection: which rank makes the others wait.
//
// Under synchronous data parallelism every rank's wall-clock step time is the same (the fast
// ones wait for the slow one inside the all-reduce), so the input must be each rank's own busy
// time: forward + backward of its micro-batches, measured before it waits for the gradients.
// The trainer all-gathers one float per rank per step and feeds the vector here (on every rank,
// so that every rank reaches the same verdict).
//
// Per step: ratio[r] = time[r] / median(time). A rank is flagged as a straggler once its ratio
// has been at least `threshold` for `consecutive` steps in a row; one step below the threshold
// clears its count (a single slow step, a checkpoint or a page fault storm, is noise). The first
// `warmup_steps` steps report ratios but count for nobody: they carry one-time costs (kernel
// primitives built, pages touched first) that differ between ranks by chance. The median
// of an even count is the mean of the two middle values, so with 2 ranks a rank at ratio 1.2 is
// 1.5x slower than the other.
#include <cstdint>
#include <span>
#include <vector>

namespace brigade {

struct StragglerOptions {
  double threshold = 1.5;  // ratio to the median at which a step counts as slow; > 1
  int consecutive = 3;     // slow steps in a row before a rank is flagged; >= 1
  int warmup_steps = 1;    // first steps that never count as slow; >= 0

  // Throws ConfigError naming the field, its value and what is allowed.
  void validate() const;
};

// The view of one step. The spans point into the detector and are valid until its next step.
struct StragglerReport {
  std::span<const double> ratio;  // per rank: time / median (1 when the median is 0)
  double median = 0;              // of the step times, in the caller's unit
  double max_ratio = 0;           // the largest ratio this step
  int slowest_rank = -1;          // the rank with max_ratio (lowest rank on ties)
  int straggler_rank = -1;        // the flagged rank with the largest ratio this step; -1: none
  std::span<const int> flagged;   // every flagged rank, ascending
};

// Keeps the per-rank slow-step counts across steps. Allocates only in the constructor.
class StragglerDetector {
 public:
  StragglerDetector(int world_size, StragglerOptions options = {});

  // Takes this step's time of every rank (world_size values, any unit; a non-finite or negative
  // value counts as 0). Returns the report of this step.
  StragglerReport observe(std::span<const float> step_time);

  int world_size() const { return static_cast<int>(ratio_.size()); }

 private:
  StragglerOptions options_;
  std::vector<double> ratio_;
  std::vector<double> times_;    // this step's times, sanitized
  std::vector<double> scratch_;  // sorted copy for the median
  std::vector<int> slow_steps_;  // consecutive slow steps per rank
  std::vector<int> flagged_;
  int64_t observed_ = 0;  // steps seen, warm-up included
};

}  // namespace brigade
