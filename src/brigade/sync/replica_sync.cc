#include "brigade/sync/replica_sync.h"

#include <algorithm>
#include <string>

#include "brigade/base/check.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/parallel/tp_state_pieces.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

ReplicaSync::ReplicaSync(Communicator& dp, const SyncedParams& synced,
                         const OptimizerConfig& optimizer_config,
                         std::unique_ptr<SyncMethod> method)
    : dp_(dp), synced_(synced), method_(std::move(method)) {
  BRIGADE_CHECK(method_ != nullptr && synced_.layout != nullptr);
  if (method_->uses_optimizer()) {
    optimizer_ = make_optimizer(optimizer_config, *synced_.layout, 0, synced_.size());
  }
}

void ReplicaSync::start_step() {
  std::fill_n(synced_.grads, synced_.size(), 0.0f);
}

ReplicaSync::~ReplicaSync() = default;

Optimizer& ReplicaSync::optimizer() {
  BRIGADE_CHECK(optimizer_) << "sync method " << method_->name() << " has no optimizer";
  return *optimizer_;
}

double ReplicaSync::grad_sum_squares() {
  float local = static_cast<float>(brigade::grad_sum_squares(synced_.grads, synced_.size()));
  dp_.all_reduce(&local, 1, ReduceOp::kAvg);
  return local;
}

double ReplicaSync::reduce_step_scalars(float* loss) {
  float v[2] = {*loss,
                static_cast<float>(brigade::grad_sum_squares(synced_.grads, synced_.size()))};
  if (!method_->independent_steps()) dp_.all_reduce(v, 2, ReduceOp::kAvg);
  *loss = v[0];
  return v[1];
}

void ReplicaSync::scale_grads(float scale) {
  if (scale != 1.0f) brigade::scale_grads(synced_.grads, synced_.size(), scale);
}

void ReplicaSync::step(float lr, int64_t step) {
  method_->step(synced_.params, synced_.grads, optimizer_.get(), lr, step, dp_);
}

Traffic ReplicaSync::step_traffic(bool applied, int64_t t) const {
  Traffic scalars =
      method_->independent_steps() ? Traffic{} : all_reduce_f32_traffic(2, dp_.size(), dp_.rank());
  return applied ? scalars + method_->traffic(t, dp_.size(), dp_.rank()) : scalars;
}

Traffic ReplicaSync::exchange_traffic(int64_t t) const {
  return method_->traffic(t, dp_.size(), dp_.rank());
}

Traffic ReplicaSync::finish_training(int64_t t) {
  return method_->finish(synced_.params, t, dp_);
}

std::vector<StateView> ReplicaSync::local_views() {
  std::vector<StateView> out;
  if (method_->local_params()) {
    out.push_back({"params", synced_.params, 0, synced_.size()});
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
// Whether [begin, end) starts and ends on tensor boundaries of layout.
bool on_tensor_boundaries(const ParamLayout& layout, int64_t begin, int64_t end) {
  bool b = begin == 0, e = end == layout.total();
  for (const ParamSpec& s : layout.specs()) {
    b = b || s.offset == begin;
    e = e || s.offset + s.numel == end;
  }
  return b && e && begin < end;
}

// A state vector on tensor boundaries (the parameters' span, a streaming fragment's), per tensor
// ("<name>/<tensor>", as optimizer state is saved under every layout, regions of the full tensor
// for a tp shard); any other vector (a compressor's residual of another length) as one 1-D
// tensor under the chunk's scope.
void add_state_pieces(std::vector<StatePiece>& out, const std::string& name, const StateView& v,
                      const SyncedParams& synced) {
  if (v.per_param && on_tensor_boundaries(*synced.layout, v.begin, v.end)) {
    for (StatePiece& p :
         tp_state_pieces(tensors_within(*synced.layout, v.begin, v.end), v.data, name + "/")) {
      out.push_back(std::move(p));
    }
    return;
  }
  const int64_t n = v.end - v.begin;
  out.push_back(
      {.piece = {synced.scope + name, {n}, StDtype::kF32, Region::whole({n})}, .data = v.data});
}
}  // namespace

std::vector<StatePiece> ReplicaSync::checkpoint_pieces() {
  std::vector<StatePiece> out;
  if (!method_->local_params() || dp_.rank() == 0) {
    out = tp_state_pieces(*synced_.layout, synced_.params);
  }
  for (const auto& v : replicated_views()) add_state_pieces(out, v.name, v, synced_);
  const std::string prefix = "replica" + std::to_string(dp_.rank()) + ".";
  for (const auto& v : local_views()) add_state_pieces(out, prefix + v.name, v, synced_);
  return out;
}

void ReplicaSync::after_restore(bool resumed) {
  if (resumed) return;
  dp_.broadcast(synced_.params, synced_.size(), 0);
  method_->start(synced_.params);
}

}  // namespace brigade
