#include "brigade/sync/replica_sync.h"

#include <string>

#include "brigade/base/check.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

ReplicaSync::ReplicaSync(Communicator& dp, Model& model, const OptimizerConfig& optimizer_config,
                         std::unique_ptr<SyncMethod> method)
    : dp_(dp), model_(model), method_(std::move(method)) {
  BRIGADE_CHECK(method_ != nullptr);
  if (method_->uses_optimizer()) {
    optimizer_ = make_optimizer(optimizer_config, model.layout(), 0, model.num_params());
  }
}

ReplicaSync::~ReplicaSync() = default;

Optimizer& ReplicaSync::optimizer() {
  BRIGADE_CHECK(optimizer_) << "sync method " << method_->name() << " has no optimizer";
  return *optimizer_;
}

double ReplicaSync::grad_sum_squares() {
  float local = static_cast<float>(brigade::grad_sum_squares(model_.grads(), model_.num_params()));
  dp_.all_reduce(&local, 1, ReduceOp::kAvg);
  return local;
}

double ReplicaSync::reduce_step_scalars(float* loss) {
  float v[2] = {*loss,
                static_cast<float>(brigade::grad_sum_squares(model_.grads(), model_.num_params()))};
  if (!method_->independent_steps()) dp_.all_reduce(v, 2, ReduceOp::kAvg);
  *loss = v[0];
  return v[1];
}

void ReplicaSync::scale_grads(float scale) {
  if (scale != 1.0f) brigade::scale_grads(model_.grads(), model_.num_params(), scale);
}

void ReplicaSync::step(float lr, int64_t step) {
  method_->step(model_.params(), model_.grads(), optimizer_.get(), lr, step, dp_);
}

Traffic ReplicaSync::step_traffic(bool applied, int64_t t) const {
  Traffic scalars =
      method_->independent_steps() ? Traffic{} : all_reduce_f32_traffic(2, dp_.size(), dp_.rank());
  return applied ? scalars + method_->traffic(t, dp_.size(), dp_.rank()) : scalars;
}

Traffic ReplicaSync::finish_training(int64_t t) {
  return method_->finish(model_.params(), t, dp_);
}

std::vector<StateView> ReplicaSync::local_views() {
  std::vector<StateView> out;
  if (method_->local_params()) {
    out.push_back({"params", model_.params(), 0, model_.num_params()});
    if (optimizer_) {
      for (const auto& v : optimizer_->state_tensors()) out.push_back(v);
    }
  }
  for (const auto& v : method_->local_state()) out.push_back(v);
  return out;
}

std::vector<StateView> ReplicaSync::replicated_views() {
  std::vector<StateView> out;
  if (optimizer_ && !method_->local_params()) {
    for (const auto& v : optimizer_->state_tensors()) out.push_back(v);
  }
  for (const auto& v : method_->replicated_state()) out.push_back(v);
  return out;
}

namespace {
// A state vector that spans the parameters, per tensor ("<name>/<tensor>", as optimizer state
// is saved under every layout); any other vector (a compressor's residual of another length) as
// one 1-D tensor.
void add_state_pieces(std::vector<StatePiece>& out, const std::string& name, const StateView& v,
                      const ParamLayout& layout) {
  if (v.begin == 0 && v.end == layout.total()) {
    for (StatePiece& p : flat_range_pieces(layout, name + "/", v.data, 0, 0, v.end)) {
      out.push_back(std::move(p));
    }
    return;
  }
  const int64_t n = v.end - v.begin;
  out.push_back({.piece = {name, {n}, StDtype::kF32, Region::whole({n})}, .data = v.data});
}
}  // namespace

std::vector<StatePiece> ReplicaSync::checkpoint_pieces() {
  std::vector<StatePiece> out;
  if (!method_->local_params() || dp_.rank() == 0) out = whole_param_pieces(model_);
  const ParamLayout& layout = model_.layout();
  for (const auto& v : replicated_views()) add_state_pieces(out, v.name, v, layout);
  const std::string prefix = "replica" + std::to_string(dp_.rank()) + ".";
  for (const auto& v : local_views()) add_state_pieces(out, prefix + v.name, v, layout);
  return out;
}

void ReplicaSync::after_restore(bool resumed) {
  if (resumed) return;
  dp_.broadcast(model_.params(), model_.num_params(), 0);
  method_->start(model_.params());
}

}  // namespace brigade
