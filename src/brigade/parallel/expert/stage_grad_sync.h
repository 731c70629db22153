#pragma once
// The data-parallel side of expert parallelism for GPT pipeline stages (model/gpt_stage.h): the
// global norm when "ep is carved out of dp" (the averaging is DataParallel's, parallel/ddp.h).
// An expert exists on the
// ranks of the dp axis that share its ep coordinate, every other tensor on all dp x ep ranks,
// and the stage has already scaled its expert gradients (1 / ep) and router aux gradients (x ep)
// so that a plain average over each tensor's replicas is the gradient of the mean loss.
#include <cstdint>

#include "brigade/comm/communicator.h"
#include "brigade/model/tp/tp_context.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class GptStage;

// The stage's part of the squared global gradient norm, the same on every rank of its ep group:
// norm_layout's tensors (the stage's layout less the tied wte copy, offsets as in the stage)
// that are dense, counted once over tp (sum_of_squares_full), plus its expert tensors' squares
// summed over ep (every ep rank holds other experts). Sum the result over pp. Collective over
// tp.comm and over ep (one float) when given; call after the gradients are averaged. base:
// where norm_layout's offset 0 lies in the stage's buffer (a ZeRO-2 rank's own range).
double stage_grad_squares(const GptStage& stage, const ParamLayout& norm_layout,
                          const TpContext& tp, Communicator* ep, int64_t base = 0);

}  // namespace brigade
