#pragma once
// Where a mixture-of-experts MLP keeps its parameters in a model's flat buffer, with GPT-2-like
// names (prefix "h.3.mlp."):
//   h.3.mlp.router.weight             (E, C)   no bias, replicated on every rank
//   h.3.mlp.experts.{e}.c_fc.weight   (4C, C)  then .c_fc.bias (4C), .c_proj.weight (C, 4C),
//                                              .c_proj.bias (C)
// Under expert parallelism a rank's layout holds the router and only its own experts
// [expert_begin, expert_end), still named by their global index, so initial values (a function
// of seed and name) and checkpoint tensors do not depend on the ep size.
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/model/moe/moe_config.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct ExpertParams {
  int64_t fc_w, fc_b, proj_w, proj_b;  // offsets in the flat buffer
};

struct MoeParams {
  int64_t router_w = 0;
  int64_t expert_begin = 0, expert_end = 0;  // global indices of the experts held here
  std::vector<ExpertParams> experts;         // expert_begin + i is experts[i]
  int64_t begin = 0, end = 0;                // the whole flat range [router, last expert]
  int64_t experts_begin = 0;                 // [experts_begin, end): expert tensors only
};

// Appends the router then experts [expert_begin, expert_end) to layout. Init: normal(0, 0.02)
// for the router and c_fc, normal(0, proj_std) for c_proj (GPT-2 passes 0.02 / sqrt(2 L)),
// biases zero; matrices decay, biases do not; nothing splits under tensor parallelism.
MoeParams add_moe_params(ParamLayout& layout, const std::string& prefix, const MoeConfig& config,
                         int64_t expert_begin, int64_t expert_end, float proj_std);

}  // namespace brigade
