#include "brigade/data/micro_batch_weights.h"

namespace brigade {

namespace {

// Valid targets of micro-batch (step, micro_step) of dp_rank.
int64_t micro_batch_targets(const Dataset& dataset, const Sampler& sampler, int64_t step,
                            int64_t micro_step, int64_t dp_rank) {
  const SamplerOptions& o = sampler.options();
  int64_t sum = 0;
  for (int64_t i = 0; i < o.micro_batch; ++i) {
    const int64_t g =
        global_example_index(step, micro_step, dp_rank, o.dp_size, o.micro_batch, o.grad_accum, i);
    sum += dataset.valid_targets(sampler.example_at(g));
  }
  return sum;
}

}  // namespace

void masked_micro_batch_weights(const Dataset& dataset, const Sampler& sampler, int64_t step,
                                bool across_ranks, float* weights) {
  const SamplerOptions& o = sampler.options();
  int64_t total = 0;
  for (int64_t j = 0; j < o.grad_accum; ++j) {
    for (int64_t r = 0; r < o.dp_size; ++r) {
      if (across_ranks || r == o.dp_rank)
        total += micro_batch_targets(dataset, sampler, step, j, r);
    }
  }
  const double ranks = across_ranks ? static_cast<double>(o.dp_size) : 1.0;
  for (int64_t j = 0; j < o.grad_accum; ++j) {
    const int64_t own = micro_batch_targets(dataset, sampler, step, j, o.dp_rank);
    weights[j] =
        total > 0
            ? static_cast<float>(static_cast<double>(own) * ranks / static_cast<double>(total))
            : 0.0f;
  }
}

}  // namespace brigade
