// DDP behind the DpStrategy interface (replicated parameters, gradients and optimizer state),
// and the factory that picks DDP or a ZeRO stage.
#include "brigade/parallel/dp_strategy.h"

#include <string>

#include "brigade/base/error.h"
#include "brigade/parallel/ddp.h"
#include "brigade/parallel/zero.h"
#include "brigade/sync/grad_clip.h"

namespace brigade {

namespace {

class DdpStrategy : public DpStrategy {
 public:
  DdpStrategy(Communicator* dp, Model& model, const OptimizerConfig& optimizer_config,
              const DpOptions& options)
      : dp_(dp),
        model_(model),
        optimizer_(make_optimizer(optimizer_config, model.layout(), 0, model.num_params())) {
    if (dp_) {
      ddp_ = std::make_unique<DataParallel>(
          *dp_, model_, DdpOptions{.bucket_elems = options.bucket_elems, .wire = options.wire});
    }
  }

  int zero_stage() const override { return 0; }
  Optimizer& optimizer() override { return *optimizer_; }

  void start_step() override { model_.zero_grads(); }
  void before_backward(bool last_micro_step) override {
    if (ddp_ && last_micro_step) ddp_->arm();  // earlier micro-steps accumulate locally
  }
  double finish_gradients() override { return ddp_ ? ddp_->finish() : 0.0; }
  // Every replica holds the same averaged gradient, so the norm needs no communication.
  double grad_sum_squares() override {
    return brigade::grad_sum_squares(model_.grads(), model_.num_params());
  }
  void scale_grads(float scale) override {
    if (scale != 1.0f) brigade::scale_grads(model_.grads(), model_.num_params(), scale);
  }
  void step(float lr, int64_t step) override {
    optimizer_->step(model_.params(), model_.grads(), 0, model_.num_params(), lr, step);
  }

  // Replicas are identical: rank 0 saves its own state.
  Optimizer* begin_save() override { return !dp_ || dp_->rank() == 0 ? optimizer_.get() : nullptr; }
  void end_save() override {}
  Optimizer& load_target() override { return *optimizer_; }
  void distribute_from_rank0(bool with_state) override {
    if (!dp_) return;
    ddp_->broadcast_parameters();
    if (!with_state) return;
    for (const auto& view : optimizer_->state_tensors()) {
      dp_->broadcast(view.data, view.end - view.begin, 0);
    }
  }

 private:
  Communicator* dp_;
  Model& model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataParallel> ddp_;
};

}  // namespace

std::unique_ptr<DpStrategy> make_dp_strategy(Communicator* dp, Model& model,
                                             const OptimizerConfig& optimizer_config,
                                             const DpOptions& options) {
  if (options.zero < 0 || options.zero > 3)
    throw ConfigError("parallel.zero = " + std::to_string(options.zero) +
                      ": allowed values are 0 (DDP), 1, 2, 3");
  // One process has nothing to shard: every stage is plain local training.
  if (options.zero == 0 || !dp || dp->size() == 1) {
    return std::make_unique<DdpStrategy>(dp, model, optimizer_config, options);
  }
  return std::make_unique<ZeroStrategy>(*dp, model, optimizer_config, options);
}

}  // namespace brigade
