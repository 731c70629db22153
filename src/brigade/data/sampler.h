#pragma once
// Deterministic distributed sampler: which examples a rank trains on at each step is a pure
// function of (seed, step, micro-step, rank), with no state to carry beyond the step count.
//
// The examples form one endless stream: global index g is position g % N of epoch g / N, and
// names example RandomPermutation(N, seed, mix_keys(kSamplerKey, epoch))(g % N). So every epoch
// visits each example exactly once, in its own order, without drop-last.
//
// Step s consumes the G = micro_batch * grad_accum * dp_size global indices [s*G, (s+1)*G).
// Micro-step j of DP rank r takes the contiguous slice of mb indices starting at
// s*G + (j*dp_size + r)*mb (see global_example_index). Concatenating the slices in (j, r)
// order gives the whole range in order, so the examples of a global batch depend on G only:
// a run with dp_size 1, 2 or 4 and the same G sees the same examples at every step, which is
// what lets "DP=4 equals one process" and elastic resizing hold.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace brigade {

// Stream key of the sampler's permutations (separates them from other users of the seed).
inline constexpr uint64_t kSamplerKey = 0x73616d706c657231ull;  // "sampler1"

// Global stream index of element i (0 <= i < micro_batch) of micro-step micro_step
// (0 <= micro_step < grad_accum) of dp_rank (0 <= dp_rank < dp_size) at step `step`:
//   step * G + (micro_step * dp_size + dp_rank) * micro_batch + i,
//   G = micro_batch * grad_accum * dp_size.
int64_t global_example_index(int64_t step, int64_t micro_step, int64_t dp_rank, int64_t dp_size,
                             int64_t micro_batch, int64_t grad_accum, int64_t i);

struct SamplerOptions {
  int64_t num_examples = 0;  // N, > 0
  uint64_t seed = 0;
  int64_t micro_batch = 1;  // examples per micro-step per rank, > 0
  int64_t grad_accum = 1;   // micro-steps per step, > 0
  int64_t dp_size = 1;      // data-parallel ranks, > 0
  int64_t dp_rank = 0;      // this rank, in [0, dp_size)
};

// What a checkpoint records to resume the data order. The steps already consumed are the only
// progress; seed, N and G must match for the order to continue unchanged (dp_size may differ).
struct SamplerState {
  uint64_t seed = 0;
  int64_t num_examples = 0;
  int64_t global_batch = 0;
  int64_t steps_consumed = 0;
};

// JSON: {"seed": u64, "num_examples": N, "global_batch": G, "steps_consumed": s}.
void to_json(nlohmann::json& j, const SamplerState& s);
// CheckpointError naming the field when one is missing, of the wrong type or out of range.
void from_json(const nlohmann::json& j, SamplerState& s);

class Sampler {
 public:
  // ConfigError naming the field for a non-positive size or a rank outside [0, dp_size).
  explicit Sampler(const SamplerOptions& options);

  const SamplerOptions& options() const { return options_; }
  int64_t global_batch() const { return global_batch_; }

  // The example at global stream index g >= 0.
  int64_t example_at(int64_t g) const;

  // The epoch that step `step` starts in.
  int64_t epoch_of_step(int64_t step) const { return step * global_batch_ / options_.num_examples; }

  // Writes this rank's micro_batch example ids of (step, micro_step) to ids.
  void micro_batch_examples(int64_t step, int64_t micro_step, int64_t* ids) const;
  // The same for rank dp_rank's part (0 <= dp_rank < dp_size): parameter-server workers under
  // dynamic assignment train whichever part they are handed.
  void micro_batch_examples(int64_t step, int64_t micro_step, int64_t dp_rank, int64_t* ids) const;

  // The state to checkpoint after `steps_consumed` steps.
  SamplerState state(int64_t steps_consumed) const;

  // The first step to run when resuming from `saved`. CheckpointError naming the mismatch if
  // the saved seed, number of examples or global batch differ from this sampler's.
  int64_t resume_step(const SamplerState& saved) const;

 private:
  SamplerOptions options_;
  int64_t global_batch_;
};

}  // namespace brigade
