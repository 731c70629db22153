#include "brigade/sync/replica_sync.h"

#include <string>

#include "brigade/base/check.h"
#include "brigade/sync/grad_clip.h"
#include "brigade/sync/lowcomm/common.h"

namespace brigade {

namespace {
// Tag of the checkpoint gather/scatter messages (one pair talks in order on one tag).
constexpr uint32_t kStateTag = 0x5359;  // "SY"
}  // namespace

// The checkpoint's view of the whole run state as one Optimizer (save_checkpoint and
// load_latest_checkpoint read and write Optimizer::state_tensors()); never steps.
class ReplicaSync::Bundle : public Optimizer {
 public:
  Bundle(const ParamLayout& layout, std::vector<StateView> own, int world,
         const std::vector<StateView>& local)
      : Optimizer(layout, 0, layout.total()), views_(std::move(own)) {
    int64_t per_replica = 0;
    for (const auto& v : local) per_replica += v.end - v.begin;
    buffers_.resize(world > 1 ? world - 1 : 0);
    for (int r = 1; r < world; ++r) {
      auto& buf = buffers_[r - 1];
      buf.assign(per_replica, 0.0f);
      int64_t at = 0;
      for (const auto& v : local) {
        views_.push_back(
            {"replica" + std::to_string(r) + "." + v.name, buf.data() + at, v.begin, v.end});
        at += v.end - v.begin;
      }
    }
  }
  void step(float*, const float*, int64_t, int64_t, float, int64_t) override {
    BRIGADE_CHECK(false) << "the checkpoint bundle of ReplicaSync does not step";
  }
  std::vector<StateView> state_tensors() override { return views_; }
  // Replica r's local state, in local_views() order.
  float* replica(int r) { return buffers_[r - 1].data(); }

 private:
  std::vector<StateView> views_;
  std::vector<std::vector<float>> buffers_;
};

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

void ReplicaSync::scale_grads(float scale) {
  if (scale != 1.0f) brigade::scale_grads(model_.grads(), model_.num_params(), scale);
}

void ReplicaSync::step(float lr, int64_t step) {
  method_->step(model_.params(), model_.grads(), optimizer_.get(), lr, step, dp_);
}

Traffic ReplicaSync::step_traffic(bool applied, int64_t t) const {
  Traffic norm = all_reduce_f32_traffic(1, dp_.size(), dp_.rank());
  return applied ? norm + method_->traffic(t, dp_.size(), dp_.rank()) : norm;
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

ReplicaSync::Bundle& ReplicaSync::make_bundle() {
  // Rank 0's own state under plain names (its parameters live in the model file).
  std::vector<StateView> own = replicated_views();
  std::vector<StateView> local = local_views();
  for (const auto& v : local) {
    if (v.name != "params") own.push_back(v);
  }
  bundle_ = std::make_unique<Bundle>(model_.layout(), std::move(own), dp_.size(), local);
  return *bundle_;
}

Optimizer* ReplicaSync::begin_save() {
  std::vector<StateView> local = local_views();
  if (dp_.rank() != 0) {
    for (const auto& v : local) {
      dp_.send(v.data, sizeof(float) * (v.end - v.begin), 0, kStateTag);
    }
    return nullptr;
  }
  Bundle& bundle = make_bundle();
  for (int r = 1; r < dp_.size(); ++r) {
    float* at = bundle.replica(r);
    for (const auto& v : local) {
      dp_.recv(at, sizeof(float) * (v.end - v.begin), r, kStateTag);
      at += v.end - v.begin;
    }
  }
  return &bundle;
}

void ReplicaSync::end_save() {
  bundle_.reset();
}

Optimizer& ReplicaSync::load_target() {
  BRIGADE_CHECK(dp_.rank() == 0) << "load_target() is rank 0's";
  return make_bundle();
}

void ReplicaSync::distribute_from_rank0(bool with_state) {
  if (!with_state) {
    bundle_.reset();
    dp_.broadcast(model_.params(), model_.num_params(), 0);
    method_->start(model_.params());
    return;
  }
  if (!method_->local_params()) dp_.broadcast(model_.params(), model_.num_params(), 0);
  for (const auto& v : replicated_views()) dp_.broadcast(v.data, v.end - v.begin, 0);
  std::vector<StateView> local = local_views();
  if (dp_.rank() == 0) {
    BRIGADE_CHECK(bundle_) << "distribute_from_rank0 without load_target";
    for (int r = 1; r < dp_.size(); ++r) {
      const float* at = bundle_->replica(r);
      for (const auto& v : local) {
        dp_.send(at, sizeof(float) * (v.end - v.begin), r, kStateTag);
        at += v.end - v.begin;
      }
    }
    bundle_.reset();
  } else {
    for (const auto& v : local) {
      dp_.recv(v.data, sizeof(float) * (v.end - v.begin), 0, kStateTag);
    }
  }
}

}  // namespace brigade
