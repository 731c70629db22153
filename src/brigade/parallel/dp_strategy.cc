// DDP behind the DpStrategy interface (replicated parameters, gradients and optimizer state),
// and the factory that picks DDP or a ZeRO stage.
#include "brigade/parallel/dp_strategy.h"

#include <algorithm>
#include <string>

#include "brigade/base/error.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/parallel/ddp.h"
#include "brigade/parallel/zero.h"

namespace brigade {

namespace {

class DdpStrategy : public DpStrategy {
 public:
  DdpStrategy(Communicator* dp, Model& model, const OptimizerConfig& optimizer_config,
              const DpOptions& options)
      : dp_(dp),
        model_(model),
        optimizer_(make_optimizer(optimizer_config, model.layout(), 0, model.num_params())),
        frozen_(model.layout(), optimizer_config.freeze) {
    if (dp_) {
      ddp_ = std::make_unique<DataParallel>(*dp_, model_,
                                            DdpOptions{.bucket_elems = options.bucket_elems,
                                                       .wire = options.wire,
                                                       .frozen = frozen_,
                                                       .overlap = options.overlap});
    }
  }

  int zero_stage() const override { return 0; }
  Optimizer& optimizer() override { return *optimizer_; }

  void start_step() override { model_.zero_grads(); }
  void before_backward(bool last_micro_step) override {
    if (ddp_ && last_micro_step) ddp_->arm();  // earlier micro-steps accumulate locally
  }
  // Frozen gradients (never reduced) are zeroed, so the norm and clipping count trainable ones.
  double finish_gradients() override {
    const double waited = ddp_ ? ddp_->finish() : 0.0;
    frozen_.zero_frozen(model_.grads(), 0, model_.num_params());
    return waited;
  }
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

  // Replicas are identical: every rank declares (and on resume reads) the whole state, which
  // rank 0 alone writes. (Splitting the writing 1/N per rank would leave each rank able to
  // read back only its own 1/N of the optimizer state.)
  std::vector<StatePiece> checkpoint_pieces() override {
    std::vector<StatePiece> out = whole_param_pieces(model_);
    for (auto& p : optimizer_state_pieces(*optimizer_, model_.layout(), 0, model_.num_params())) {
      out.push_back(std::move(p));
    }
    return out;
  }
  void after_restore(bool resumed) override {
    if (dp_ && !resumed) ddp_->broadcast_parameters();
  }

 private:
  Communicator* dp_;
  Model& model_;
  std::unique_ptr<Optimizer> optimizer_;
  TrainableMask frozen_;  // train.freeze over the model's layout
  std::unique_ptr<DataParallel> ddp_;
};

}  // namespace

std::vector<StatePiece> flat_range_pieces(const ParamLayout& layout, const std::string& prefix,
                                          float* data, int64_t data_begin, int64_t begin,
                                          int64_t end) {
  std::vector<StatePiece> out;
  for (const auto& spec : layout.specs()) {
    const int64_t lo = std::max(begin, spec.offset);
    const int64_t hi = std::min(end, spec.offset + spec.numel);
    if (lo >= hi) continue;
    const Region region = lo == spec.offset && hi == spec.offset + spec.numel
                              ? Region::whole(spec.shape)
                              : Region::range(lo - spec.offset, hi - spec.offset);
    out.push_back({.piece = {prefix + spec.name, spec.shape, StDtype::kF32, region},
                   .data = data + (lo - data_begin)});
  }
  return out;
}

std::vector<StatePiece> whole_param_pieces(FlatParams& model) {
  return flat_range_pieces(model.layout(), "", model.params(), 0, 0, model.num_params());
}

std::vector<StatePiece> param_range_pieces(FlatParams& model, int64_t begin, int64_t end) {
  return flat_range_pieces(model.layout(), "", model.params(), 0, begin, end);
}

std::vector<StatePiece> optimizer_state_pieces(Optimizer& optimizer, const ParamLayout& layout,
                                               int64_t begin, int64_t end) {
  std::vector<StatePiece> out;
  for (const auto& view : optimizer.state_tensors()) {
    for (StatePiece& p : flat_range_pieces(layout, view.name + "/", view.data, view.begin,
                                           std::max(begin, view.begin), std::min(end, view.end))) {
      out.push_back(std::move(p));
    }
  }
  return out;
}

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
