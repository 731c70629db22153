// The data-parallel step. Each step: zero the gradients, run grad_accum micro-steps of forward
// + backward (each scaled by 1/grad_accum; under data parallelism gradient buckets are reduced
// while backward runs), then agree on the mean loss and the global gradient norm. How replicas
// agree (DDP or a ZeRO stage, parallel.zero; or a low-communication method, sync.method) is the
// DpStrategy's business (parallel/dp_strategy.h, sync/replica_sync.h).
#include "brigade/train/dp_engine.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/data/micro_batch_weights.h"
#include "brigade/model/moe/moe_metrics.h"
#include "brigade/monitor/timer.h"
#include "brigade/optim/optimizer.h"
#include "brigade/optim/trainable_mask.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/ps/ps_worker.h"
#include "brigade/sync/replica_sync.h"
#include "brigade/train/job_check.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/sync_strategy.h"

namespace brigade {

namespace {

// Test hook: BRIGADE_FAULT_SLOW_RANK=r with BRIGADE_FAULT_SLOW_MS=t makes rank r (-1: every
// rank) sleep t ms in every forward, as a rank on a slower or busier machine would (straggler
// detection; a run slow enough to be hit mid-way).
double injected_slow_s(int rank) {
  const char* r = std::getenv("BRIGADE_FAULT_SLOW_RANK");
  const char* ms = std::getenv("BRIGADE_FAULT_SLOW_MS");
  if (!r || !ms || (std::atoi(r) != rank && std::atoi(r) != -1)) return 0;
  return std::atof(ms) / 1e3;
}

class DpEngine final : public TrainEngine {
 public:
  DpEngine(TrainContext& ctx, int64_t dp)
      : ctx_(ctx),
        config_(ctx.config),
        group_(ctx.group),
        rank_(ctx.rank),
        dp_size_(dp),
        model_(make_model(config_.model, config_.train.micro_batch,
                          config_.train.recompute == RecomputeMode::kBlock)),
        sync_(make_sync_strategy(
            config_, group_.world.get(), *model_, group_.world_options.store,
            [this](const std::string& line) { ctx_.log.line(line); }, rank_,
            static_cast<int>(dp_size_))),
        replica_(dynamic_cast<ReplicaSync*>(sync_.get())),
        ps_(dynamic_cast<PsWorker*>(sync_.get())),
        loader_(*ctx.data.train, SamplerOptions{.seed = static_cast<uint64_t>(config_.run.seed),
                                                .micro_batch = config_.train.micro_batch,
                                                .grad_accum = config_.train.grad_accum,
                                                .dp_size = dp_size_,
                                                .dp_rank = rank_}),
        batch_(loader_.make_batch()),
        eval_batch_(ctx.data.val->make_batch(config_.train.micro_batch)),
        micro_weights_(static_cast<size_t>(config_.train.grad_accum)),
        slow_s_(injected_slow_s(rank_)),
        // Every rank refuses a pattern that names no tensor alike, before any collective.
        freeze_(check_freeze_patterns(model_->layout(), freeze_patterns(config_))) {}

  void log_layout() override {
    ctx_.log.info("run folder {}; process {} of {} ({}), data parallel over {}{}", ctx_.folder.root,
                  rank_, group_.size(), group_.env.source, dp_size_,
                  sync_->zero_stage() > 0 ? fmt::format(" with ZeRO-{}", sync_->zero_stage())
                  : config_.parallel.zero > 0 && dp_size_ == 1
                      ? " (parallel.zero ignored: one process has nothing to shard)"
                      : "");
    ctx_.log.info("replicas sync by {}{}", describe_sync(config_.sync, config_.parallel),
                  config_.sync.method != SyncKind::kDdp && !replica_ && !ps_
                      ? " (ignored: one process has no replica to sync with; plain local training)"
                      : "");
    if (ps_) {
      const PsConfig& ps = config_.ps;
      ctx_.log.info(
          "parameter servers: {} server(s) own the parameters and optimizer state, {} "
          "worker(s) train; consistency {}{}{}{}",
          ps.servers, dp_size_, ps.consistency,
          ps.consistency == "ssp" ? fmt::format(" (staleness <= {})", ps.staleness) : "",
          ps.aggregate > 1 ? fmt::format(", {} pushes per update", ps.aggregate) : "",
          ps.staleness_lr ? ", step divided by staleness" : "");
    }
  }

  void log_model() override {
    ctx_.log.info(
        "model {}: {} parameters; optimizer {}; {} steps x {} micro-batches x {} ranks x {} "
        "examples{}",
        config_.model.kind, model_->num_params(), config_.train.optimizer, config_.train.steps,
        config_.train.grad_accum, dp_size_, config_.train.micro_batch,
        config_.model.kind == ModelKind::kGpt ? fmt::format(" of {} tokens", config_.context())
                                              : "");
    if (!freeze_patterns(config_).empty()) ctx_.log.info("{}", describe_freeze(freeze_));
  }

  void initialize(uint64_t seed) override { model_->initialize(seed); }
  int64_t examples_per_step() const override {
    return config_.train.micro_batch * config_.train.grad_accum * dp_size_;
  }
  DataLoader& loader() override { return loader_; }

  StepGradients compute_gradients(int64_t step) override {
    const int64_t accum = config_.train.grad_accum;
    Stopwatch busy;
    StepBreakdown times;
    sync_->start_step();
    double loss = 0;
    // Masked targets: micro-batches weighted by their valid targets (data/micro_batch_weights.h),
    // the weights summing to accum over the step (so the mean below is unchanged in form).
    const bool masked = ctx_.data.train->masks_targets();
    if (masked) {
      masked_micro_batch_weights(*ctx_.data.train, loader_.sampler(), step,
                                 replicas_wait_each_step(), micro_weights_.data());
      for (float& w : micro_weights_) w *= static_cast<float>(accum);
    }
    // Dynamic assignment: the part of `step` this worker was handed, else its own.
    const std::optional<PsWorker::Slice> slice = ps_ ? ps_->slice() : std::nullopt;
    for (int64_t j = 0; j < accum; ++j) {
      Stopwatch data;
      slice ? loader_.next(batch_, step, j, slice->part) : loader_.next(batch_, step, j);
      times.data_s += data.seconds();
      if (slow_s_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(slow_s_));
      const float weight = masked ? micro_weights_[static_cast<size_t>(j)] : 1.0f;
      loss += static_cast<double>(model_->forward(batch_)) * weight;
      sync_->before_backward(j == accum - 1);
      model_->backward(batch_, weight / static_cast<float>(accum));
    }
    // Own compute only: what follows waits for the other ranks' gradients.
    const double busy_s = busy.seconds() - times.data_s;
    Stopwatch comm;
    exposed_comm_s_ = sync_->finish_gradients();
    double norm = 0;
    if (replica_) {
      // Loss and squared norm in one all-reduce (none when replicas step independently).
      float mean_loss = static_cast<float>(loss / static_cast<double>(accum));
      norm = std::sqrt(replica_->reduce_step_scalars(&mean_loss));
      loss = mean_loss;
    } else {
      float mean_loss = static_cast<float>(loss / static_cast<double>(accum));
      // Asynchronous parameter-server workers do not wait for each other: their loss is their own.
      if (group_.world && replicas_wait_each_step()) {
        group_.world->all_reduce(&mean_loss, 1, ReduceOp::kAvg);
      }
      loss = mean_loss;
      // Collective under ZeRO (each rank holds one shard of the gradient), so every rank takes
      // it before deciding anything from it.
      norm = std::sqrt(sync_->grad_sum_squares());
    }
    times.compute_s = busy_s;
    times.comm_s = comm.seconds();  // the exposed gradient wait and the scalar collectives
    return {.loss = loss, .norm = norm, .busy_s = busy_s, .times = times};
  }

  void scale_grads(float scale) override { sync_->scale_grads(scale); }
  void apply_update(float lr, int64_t updates) override { sync_->step(lr, updates); }
  void skip_update(int64_t updates) override {
    if (ps_) ps_->skip_step(updates);
  }
  void prepare_checkpoint(int64_t step) override {
    if (!ps_) return;
    ps_->prepare_checkpoint(step);
    if (!ps_->saved_state().cut) {
      ctx_.log.info(
          "checkpoint of step {}: the servers' state of this moment, not a consistent cut (a "
          "save between checkpoint steps, e.g. on a signal): fast workers' later updates may "
          "be in it and slow workers' earlier ones not",
          step);
    }
  }

  void add_step_metrics(nlohmann::json& rec, bool applied, int64_t updates, bool last,
                        const Traffic& loop_traffic) override {
    if (group_.world) rec["comm_exposed_ms"] = exposed_comm_s_ * 1e3;
    // Rank 0's micro-batches.
    if (const MoeTotals moe = model_->take_moe_totals(); !moe.empty())
      add_moe_step_metrics(rec, moe);
    if (ps_) add_staleness_metrics(rec);
    if (!replica_) return;
    // Bytes by formula: the loss and norm all-reduce and the method's exchange, the loop's own
    // (the straggler all-gather); on the last step also the final sync of replicas that drift
    // (DiLoCo).
    Traffic formula = replica_->step_traffic(applied, updates) + loop_traffic;
    if (last) formula = formula + replica_->finish_training(updates);
    formula_total_ = formula_total_ + formula;
    rec["comm_formula_sent_bytes"] = formula.sent;
    rec["comm_formula_recv_bytes"] = formula.received;
    rec["comm_formula_rounds"] = formula.rounds;
  }

  bool replicas_wait_each_step() const override {
    if (ps_) return !ps_->independent_steps();
    return !replica_ || !replica_->method().independent_steps();
  }

  // Ranks evaluate different numbers of batches, so parameters sharded by ZeRO-3 are gathered
  // once for the whole pass instead of layer by layer (which would need every rank's forwards).
  EvalSums evaluate() override {
    sync_->begin_full_params();
    // Ranks that step with no collective (parameter-server workers under ssp/asp) each
    // evaluate every batch themselves.
    const bool alone = !group_.world;
    EvalSums sums =
        brigade::evaluate(*model_, *ctx_.data.val, eval_batch_, config_.train.micro_batch,
                          config_.train.eval_batches, alone ? 0 : rank_, alone ? 1 : dp_size_);
    sync_->end_full_params();
    return sum_over_ranks(sums, group_.world.get());
  }

  std::vector<StatePiece> checkpoint_pieces() override { return sync_->checkpoint_pieces(); }
  nlohmann::json checkpoint_mesh() const override {
    return {{"dp", dp_size_}, {"zero", sync_->zero_stage()}, {"sync", config_.sync.method}};
  }
  nlohmann::json checkpoint_extra() const override {
    nlohmann::json extra = {{"sync", sync_record(config_, dp_size_)}};
    // What the servers' state holds (after prepare_checkpoint): the updates applied, and
    // whether it is a consistent cut of the saved step.
    if (ps_) {
      extra["ps"] = {{"updates_applied", ps_->saved_state().updates_applied},
                     {"consistent_cut", ps_->saved_state().cut}};
    }
    return extra;
  }
  void check_resume(const SavedState& s, const std::string& dir) const override {
    check_sync_record(s.extra, config_, dp_size_, dir);
  }
  ParamLayout checkpoint_layout() const override { return model_->layout(); }
  void after_restore(bool resumed) override { sync_->after_restore(resumed); }
  void set_start_step(int64_t step) override {
    if (ps_) ps_->set_start_step(step);
  }
  std::optional<int64_t> joined_step() const override {
    if (!ps_) return std::nullopt;
    return ps_->joined_step();
  }
  int64_t next_step(int64_t candidate, int64_t end) const override {
    if (!assigns_steps()) return candidate;
    const std::optional<PsWorker::Slice> slice = ps_->slice();
    return slice ? slice->step : end;
  }
  bool assigns_steps() const override { return ps_ && ps_->dynamic(); }
  void after_initial_weights() override { sync_->after_initial_weights(); }

  std::vector<CommChannel> comm_channels() override {
    std::vector<CommChannel> channels;
    if (group_.world) channels.push_back({"dp", &group_.world->stats()});
    if (ps_) channels.push_back({"ps", &ps_->stats()});
    return channels;
  }

  void add_summary(nlohmann::json& summary) override {
    summary["sync_method"] = config_.sync.method;
    if (const MoeTotals moe = model_->moe_run_totals(); !moe.empty()) add_moe_summary(summary, moe);
    if (group_.world) summary["comm"] = group_.world->stats().summary();
    if (ps_) {
      const PsStalenessRecord& r = ps_->staleness();
      summary["ps_updates_applied"] = r.applied;
      summary["ps_staleness_max"] = r.max;
      summary["ps_staleness_counts"] = r.counts;
      if (ps_->dynamic()) summary["ps_slices_trained"] = ps_->slices_trained();
    }
    if (replica_) {
      summary["comm_formula_sent_bytes"] = formula_total_.sent;
      summary["comm_formula_recv_bytes"] = formula_total_.received;
    }
  }

 private:
  // The servers' staleness record since the last step's (as of this worker's last pull): its
  // histogram (counts of staleness 0, 1, ..., 15 and more), the largest so far, updates applied.
  void add_staleness_metrics(nlohmann::json& rec) {
    const PsStalenessRecord& now = ps_->staleness();
    std::vector<int64_t> counts(now.counts.begin(), now.counts.end());
    double weighted = 0;
    int64_t applied = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      counts[i] -= staleness_seen_.counts[i];
      weighted += static_cast<double>(i) * static_cast<double>(counts[i]);
      applied += counts[i];
    }
    rec["ps_staleness"] = counts;
    rec["ps_staleness_mean"] = applied > 0 ? weighted / static_cast<double>(applied) : 0.0;
    rec["ps_staleness_max"] = now.max;
    rec["ps_updates_applied"] = now.applied;
    staleness_seen_ = now;
  }

  TrainContext& ctx_;
  const Config& config_;
  ProcessGroup& group_;
  int rank_;
  int64_t dp_size_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DpStrategy> sync_;  // DDP, ZeRO or ReplicaSync; owns this rank's optimizer
  ReplicaSync* replica_;              // sync_ for the low-communication methods, else null
  PsWorker* ps_;                      // sync_ when sync.method = "ps", else null
  PsStalenessRecord staleness_seen_;  // the record of the previous step's metrics
  DataLoader loader_;
  Batch batch_;
  Batch eval_batch_;
  std::vector<float> micro_weights_;  // (grad_accum) this step's micro-batch weights, if masked
  double slow_s_;
  FreezeSummary freeze_;  // train.freeze over the model (the strategy applies it)
  double exposed_comm_s_ = 0;
  Traffic formula_total_;  // replica sync: bytes by formula over this invocation's steps
};

}  // namespace

std::unique_ptr<TrainEngine> make_dp_engine(TrainContext& ctx, int64_t dp) {
  return std::make_unique<DpEngine>(ctx, dp);
}

}  // namespace brigade
