#pragma once
// How much each micro-batch counts in a step's loss when examples hold different numbers of
// targets (masked targets: instruction data, data/instruction_dataset.h).
//
// The GPT's forward returns the mean over a micro-batch's own valid targets, so averaging
// micro-batches (1/grad_accum each, then the mean over dp ranks) would weight a target by how
// many others share its micro-batch, and a step would depend on how the global batch is cut into
// ranks and micro-batches. Instead micro-batch j of rank r, holding v_rj valid targets, gets
// weight v_rj * D / V, where V sums the valid targets of every micro-batch of the step over the
// D ranks whose gradients are then averaged; the averaged loss and gradient are then the mean
// over the global batch's V targets, the same for any dp_size and grad_accum with that global
// batch. Every rank computes V from the deterministic sampler (data/sampler.h) without
// communication. Replicas that step on their own (DiLoCo, asynchronous parameter servers) use
// D = 1 and their own micro-batches. The model-parallel engine, whose stages already take the
// mean over their replica's whole step, scales each replica by the sum of its weights.
#include <cstdint>

#include "brigade/data/loader.h"
#include "brigade/data/sampler.h"

namespace brigade {

// Writes the weights of dp rank `dp_rank`'s grad_accum micro-batches of `step` to weights
// (sampler.options().grad_accum entries): over all dp ranks when across_ranks, else over this
// rank's. All zero when the step holds no valid target. No allocation.
void masked_micro_batch_weights(const Dataset& dataset, const Sampler& sampler, int64_t step,
                                bool across_ranks, float* weights);

}  // namespace brigade
