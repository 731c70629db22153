#include "brigade/model/moe/moe_params.h"

#include "brigade/base/check.h"

namespace brigade {

MoeParams add_moe_params(ParamLayout& layout, const std::string& prefix, const MoeConfig& config,
                         int64_t expert_begin, int64_t expert_end, float proj_std) {
  BRIGADE_CHECK(0 <= expert_begin && expert_begin <= expert_end && expert_end <= config.n_experts)
      << "experts [" << expert_begin << ", " << expert_end << ") of " << config.n_experts;
  const int64_t C = config.d_model, E = config.n_experts;
  // Field by field rather than designated initializers: ParamSpec grows fields (tensor
  // parallelism) whose defaults are right for replicated tensors.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Init init, float std,
                 bool decay) {
    ParamSpec spec;
    spec.name = name;
    spec.shape = std::move(shape);
    spec.init = init;
    spec.init_std = std;
    spec.weight_decay = decay;
    spec.tp_split = TpSplit::kReplicated;
    return layout.add(std::move(spec));
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> shape, float std) {
    return add(name, std::move(shape), Init::kNormal, std, true);
  };
  auto bias = [&](const std::string& name, int64_t n) {
    return add(name, {n}, Init::kZeros, 0.0f, false);
  };
  MoeParams p;
  p.router_w = weight(prefix + "router.weight", {E, C}, 0.02f);
  p.begin = p.router_w;
  p.expert_begin = expert_begin;
  p.expert_end = expert_end;
  p.experts_begin = layout.total();
  for (int64_t e = expert_begin; e < expert_end; ++e) {
    const std::string x = prefix + "experts." + std::to_string(e) + ".";
    ExpertParams ep;
    ep.fc_w = weight(x + "c_fc.weight", {4 * C, C}, 0.02f);
    ep.fc_b = bias(x + "c_fc.bias", 4 * C);
    ep.proj_w = weight(x + "c_proj.weight", {C, 4 * C}, proj_std);
    ep.proj_b = bias(x + "c_proj.bias", C);
    p.experts.push_back(ep);
  }
  p.end = layout.total();
  return p;
}

}  // namespace brigade
