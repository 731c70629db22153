#include "brigade/parallel/zero.h"

#include <algorithm>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/parallel/shard_transfer.h"

namespace brigade {

ZeroStrategy::ZeroStrategy(Communicator& dp, Model& model, const OptimizerConfig& optimizer_config,
                           const DpOptions& options)
    : dp_(dp),
      model_(model),
      stage_(options.zero),
      shards_(model.num_params(), dp.size(), FlatBuffer::page_floats()),
      own_(shards_.owned(dp.rank())) {
  BRIGADE_CHECK(stage_ >= 1 && stage_ <= 3) << "ZeRO stage " << stage_;
  if (stage_ == 3 && model.param_groups().empty())
    throw ConfigError(
        "parallel.zero = 3: the model does not gather its parameters layer group "
        "by layer group (supported: model.kind = \"gpt\"); use zero <= 2");
  if (stage_ >= 2 && options.wire != WireDtype::kF32)
    throw ConfigError(
        "parallel.grad_wire = \"bf16\": only with parallel.zero <= 1 (ZeRO-2/3 "
        "reduce-scatter f32 gradients)");
  model_.pad_flat_buffers(shards_.padded());
  optimizer_ = make_optimizer(optimizer_config, model_.layout(), own_.begin, own_.end);
  frozen_ = TrainableMask(model_.layout(), optimizer_config.freeze);
  if (stage_ == 1) {
    ddp_ = std::make_unique<DataParallel>(dp_, model_,
                                          DdpOptions{.bucket_elems = options.bucket_elems,
                                                     .wire = options.wire,
                                                     .frozen = frozen_,
                                                     .overlap = options.overlap});
  } else {
    // A reduce-scatter bucket is received as one row per rank: buckets of bucket_elems / N keep
    // each receive buffer at bucket_elems, and the same goes for the all-gather chunks below.
    // At most 4 x bucket_elems of gradient is being exchanged at once: enough to keep the
    // communicator busy while backward computes, little enough that gradient pages never pile
    // up when it falls behind.
    reducer_ = std::make_unique<ShardReducer>(
        dp_, model_, shards_, std::max<int64_t>(1, options.bucket_elems / dp.size()),
        /*max_in_flight_elems=*/4 * options.bucket_elems);
  }
  if (stage_ == 3) {
    gatherer_ = std::make_unique<ShardedParams>(dp_, model_, shards_, options.gather_budget_groups);
    // Gradients first (their buckets launch and give pages back), then the parameters whose
    // gradients are final go, and a waiting prefetch starts in the room made.
    model_.set_grad_ready_hook([this](int64_t offset, int64_t count) {
      reducer_->on_grad_ready(offset, count);
      gatherer_->grads_final(offset, count);
    });
  }
  chunk_ = std::max<int64_t>(1, std::min(options.bucket_elems / dp.size(), shards_.shard()));
  if (stage_ <= 2) {
    for (int s = 0; s < 2; ++s) {
      gather_in_[s].resize(static_cast<size_t>(chunk_));
      gather_out_[s].resize(static_cast<size_t>(chunk_ * dp.size()));
    }
  }
}

ZeroStrategy::~ZeroStrategy() {
  model_.set_grad_ready_hook(nullptr);  // the ZeRO-3 hook calls members destroyed before reducer_
  for (auto& w : gather_work_) {
    if (!w) continue;
    try {
      w->wait();
    } catch (const std::exception&) {
      // The communicator is broken; the caller's path reports it.
    }
  }
}

void ZeroStrategy::start_step() {
  if (stage_ == 1) {
    model_.zero_grads();
  } else {
    reducer_->start_step();
  }
}

void ZeroStrategy::before_backward(bool last_micro_step) {
  if (stage_ == 1) {
    if (last_micro_step) ddp_->arm();  // earlier micro-steps accumulate the full local gradient
  } else {
    exposed_s_ += reducer_->arm();  // sharded gradients: every micro-step is reduce-scattered
  }
  if (gatherer_) gatherer_->begin_backward();
}

double ZeroStrategy::finish_gradients() {
  double waited = exposed_s_ + (stage_ == 1 ? ddp_->finish() : reducer_->finish());
  exposed_s_ = 0;
  // The own shard's frozen gradients (stage 1: never reduced; 2, 3: reduced) count for nothing.
  frozen_.zero_frozen(model_.grads(), own_.begin, own_.end);
  if (gatherer_) waited += gatherer_->take_waited_seconds();  // forward and backward gathers
  return waited;
}

double ZeroStrategy::grad_sum_squares() {
  return sum_over_ranks(dp_, brigade::grad_sum_squares(model_.grads() + own_.begin, own_.size()));
}

void ZeroStrategy::scale_grads(float scale) {
  if (scale != 1.0f) brigade::scale_grads(model_.grads() + own_.begin, own_.size(), scale);
}

void ZeroStrategy::step(float lr, int64_t step) {
  if (stage_ <= 2) {
    step_and_all_gather(lr, step);
    return;
  }
  if (!own_.empty())
    optimizer_->step(model_.params(), model_.grads(), own_.begin, own_.end, lr, step);
  gatherer_->release_all();  // nothing gathered may outlive the update
}

void ZeroStrategy::step_and_all_gather(float lr, int64_t step) {
  const int me = dp_.rank();
  const int64_t shard = shards_.shard();
  const int64_t chunks = (shard + chunk_ - 1) / chunk_;
  float* params = model_.params();
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = me * shard + k * chunk_;
    const int64_t len = std::min(chunk_, shard - k * chunk_);
    const FlatRange piece = intersect({begin, begin + len}, own_);  // padding is not trained
    if (!piece.empty()) optimizer_->step(params, model_.grads(), piece.begin, piece.end, lr, step);
    const int s = static_cast<int>(k % 2);
    std::copy(params + begin, params + begin + len, gather_in_[s].data());
    gather_work_[s] = dp_.all_gather_async(gather_in_[s].data(), gather_out_[s].data(), len);
    if (k > 0) finish_gather_chunk(k - 1);
  }
  if (chunks > 0) finish_gather_chunk(chunks - 1);
}

void ZeroStrategy::finish_gather_chunk(int64_t k) {
  const int s = static_cast<int>(k % 2);
  const int64_t shard = shards_.shard();
  const int64_t len = std::min(chunk_, shard - k * chunk_);
  gather_work_[s]->wait();
  gather_work_[s].reset();
  const float* rows = gather_out_[s].data();
  for (int p = 0; p < dp_.size(); ++p) {
    if (p == dp_.rank()) continue;
    std::copy(rows + p * len, rows + (p + 1) * len, model_.params() + p * shard + k * chunk_);
  }
}

// Stages 1 and 2 hold every parameter (replicated: written once, by rank 0); stage 3 only its
// shard. The optimizer state is always the own shard.
std::vector<StatePiece> ZeroStrategy::checkpoint_pieces() {
  std::vector<StatePiece> out =
      stage_ == 3 ? param_range_pieces(model_, own_.begin, own_.end) : whole_param_pieces(model_);
  for (auto& p : optimizer_state_pieces(*optimizer_, model_.layout(), own_.begin, own_.end)) {
    out.push_back(std::move(p));
  }
  return out;
}

void ZeroStrategy::after_restore(bool resumed) {
  if (!resumed) {
    if (stage_ == 3) {
      scatter_from_root(dp_, shards_, model_.params(), model_.params() + own_.begin);
    } else {
      dp_.broadcast(model_.params(), model_.num_params(), 0);
    }
  }
  // Stage 3: only the own shard is current; drop whatever initialisation left resident.
  if (stage_ == 3) gatherer_->release_all();
}

void ZeroStrategy::after_initial_weights() {
  if (stage_ != 3) return after_restore(false);
  gatherer_->release_all();
}

void ZeroStrategy::begin_full_params() {
  if (stage_ == 3) gatherer_->gather_all();
}

void ZeroStrategy::end_full_params() {
  if (stage_ == 3) gatherer_->release_all();
}

}  // namespace brigade
