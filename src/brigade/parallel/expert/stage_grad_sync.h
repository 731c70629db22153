#pragma once
// The data-parallel side of expert parallelism for GPT pipeline stages (model/gpt_stage.h):
// gradient averaging and the global norm when "ep is carved out of dp". An expert exists on the
// ranks of the dp axis that share its ep coordinate, every other tensor on all dp x ep ranks,
// and the stage has already scaled its expert gradients (1 / ep) and router aux gradients (x ep)
// so that a plain average over each tensor's replicas is the gradient of the mean loss.
#include <cstdint>

#include "brigade/comm/communicator.h"
#include "brigade/model/tp/tp_context.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class GptStage;

// Averages the stage's gradients over their replicas: expert_ranges() over dp (Mesh::comm(kDP)),
// dense_ranges() over replicas (dp x ep, Mesh::replica_comm()), in all-reduces of at most
// bucket_floats floats, in the stage's range order. A communicator of size 1 is skipped.
// Collective over both.
void average_stage_grads(GptStage& stage, Communicator& dp, Communicator& replicas,
                         int64_t bucket_floats);

// The stage's part of the squared global gradient norm, the same on every rank of its ep group:
// norm_layout's tensors (the stage's layout less the tied wte copy, offsets as in the stage)
// that are dense, counted once over tp (sum_of_squares_full), plus its expert tensors' squares
// summed over ep (every ep rank holds other experts). Sum the result over pp. Collective over
// tp.comm and over ep (one float) when given; call after average_stage_grads.
double stage_grad_squares(const GptStage& stage, const ParamLayout& norm_layout,
                          const TpContext& tp, Communicator* ep);

}  // namespace brigade
