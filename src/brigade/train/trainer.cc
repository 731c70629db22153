// The training loop. Each step: zero the gradients, run grad_accum micro-steps of forward +
// backward (each scaled by 1/grad_accum; under data parallelism gradient buckets are reduced
// while backward runs), stop or skip on a non-finite loss, clip the global gradient norm,
// update with the scheduled learning rate, record metrics; evaluate and checkpoint on
// schedule. Every rank runs the same loop on its slice of the global batch; how replicas agree
// (DDP or a ZeRO stage, parallel.zero; or a low-communication method, sync.method) is the
// DpStrategy's business (parallel/dp_strategy.h, sync/replica_sync.h).
#include "brigade/train/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/metrics.h"
#include "brigade/monitor/progress.h"
#include "brigade/monitor/timer.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/runtime/process_group.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/sync/grad_clip.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lr_schedule.h"
#include "brigade/sync/optimizer.h"
#include "brigade/sync/replica_sync.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/evaluate.h"
#include "brigade/train/hybrid_layout.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/model_parallel_trainer.h"
#include "brigade/train/sync_strategy.h"
#include "brigade/train/training_data.h"

namespace brigade {

namespace {

// Test hook: BRIGADE_FAULT_NAN_STEP=N makes the loss of step N (1-based) NaN, as a diverging
// run would, to exercise the non-finite path end to end.
int64_t injected_nan_step() {
  const char* v = std::getenv("BRIGADE_FAULT_NAN_STEP");
  return v ? std::atoll(v) : -1;
}

// The data-parallel degree of the job; only DP is implemented, so it must cover every process.
int64_t dp_degree(const Config& config, const ProcessGroup& group) {
  int64_t dp = config.parallel.dp == 0 ? group.size() : config.parallel.dp;
  if (dp != group.size()) {
    throw ConfigError(
        fmt::format("parallel.dp = {}: the job has {} processes (dp = 0 uses them "
                    "all)",
                    config.parallel.dp, group.size()));
  }
  return dp;
}

class Trainer {
 public:
  Trainer(const Config& config, ProcessGroup& group)
      : config_(config),
        group_(group),
        rank_(group.rank()),
        dp_size_(dp_degree(config, group)),
        folder_(create_run_folder(config, rank_)),
        log_(rank_, folder_.rank_log_path(rank_), rank_ == 0),
        data_(load_training_data(config, folder_)),
        model_(make_model(config.model, config.train.micro_batch)),
        sync_(make_sync_strategy(config, group_.world.get(), *model_, group_.world_options.store,
                                 [this](const std::string& line) { log_.line(line); })),
        replica_(dynamic_cast<ReplicaSync*>(sync_.get())),
        loader_(*data_.train, SamplerOptions{.seed = static_cast<uint64_t>(config.run.seed),
                                             .micro_batch = config.train.micro_batch,
                                             .grad_accum = config.train.grad_accum,
                                             .dp_size = dp_size_,
                                             .dp_rank = rank_}),
        batch_(loader_.make_batch()),
        eval_batch_(data_.val->make_batch(config.train.micro_batch)),
        progress_(config.train.log_every) {
    if (rank_ == 0) metrics_ = std::make_unique<MetricsWriter>(folder_.metrics_path());
    schedule_ = LrSchedule{.max_lr = static_cast<float>(config.train.lr),
                           .min_lr = static_cast<float>(config.train.min_lr),
                           .warmup = config.train.warmup,
                           .total = config.train.steps};
    schedule_.validate();
  }

  int run();

 private:
  void start_or_resume();
  void restore();
  bool train_step(int64_t step);  // false: the step was skipped (non-finite)
  float average_over_ranks(float value);
  void eval_and_record(int64_t step, bool final);
  void checkpoint(int64_t step);
  void report_save(const SaveResult& result);
  void finish_checkpoints();  // waits for the last save
  void record(const nlohmann::json& rec) {
    if (metrics_) metrics_->write(rec);
  }
  void log_line(const std::string& line) {
    if (line.empty() || rank_ != 0) return;
    progress_.on_terminal() ? log_.file_only(line) : log_.line(line);
  }
  double tokens_per_example() const {
    return config_.model.kind == "gpt" ? static_cast<double>(config_.context()) : 1.0;
  }

  Config config_;
  ProcessGroup& group_;
  int rank_;
  int64_t dp_size_;
  RunFolder folder_;
  Log log_;
  TrainingData data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DpStrategy> sync_;  // DDP, ZeRO or ReplicaSync; owns this rank's optimizer
  ReplicaSync* replica_;              // sync_ when sync.method is not "ddp", else null
  DataLoader loader_;
  Batch batch_;
  Batch eval_batch_;
  std::unique_ptr<MetricsWriter> metrics_;  // rank 0 only
  Progress progress_;
  LrSchedule schedule_;
  nlohmann::json provenance_;
  nlohmann::json summary_;

  int64_t start_step_ = 0;
  int64_t updates_ = 0;
  int64_t skipped_ = 0;
  int64_t nan_step_ = injected_nan_step();
  std::string last_checkpoint_ = "none";
  std::unique_ptr<TrainingCheckpointer> ckpt_;  // after restore(): saves this rank's pieces
  double last_loss_ = 0, last_norm_ = 0, last_exposed_comm_s_ = 0;
  Traffic formula_total_;  // replica sync: bytes by formula over this invocation's steps
};

// What a checkpoint records about how replicas were synced, and the check that a resume can
// use it: replica-local state (sync/replica_sync.h) is saved per replica, so a low-communication
// method resumes only with the same method and number of replicas. DDP and ZeRO checkpoints hold
// no per-replica state and resume each other at any size.
nlohmann::json sync_record(const Config& config, int64_t replicas) {
  return {{"method", config.sync.method}, {"replicas", replicas}};
}

void check_sync_record(const nlohmann::json& saved, const Config& config, int64_t replicas,
                       const std::string& dir) {
  const std::string method =
      saved.contains("method") ? saved.at("method").get<std::string>() : "ddp";
  const int64_t saved_replicas =
      saved.contains("replicas") ? saved.at("replicas").get<int64_t>() : replicas;
  if (method == "ddp" && config.sync.method == "ddp") return;
  if (method == config.sync.method && saved_replicas == replicas) return;
  throw ConfigError(fmt::format(
      "{} was written with sync.method = \"{}\" on {} replicas; this run has sync.method = "
      "\"{}\" on {}. Low-communication methods keep state per replica, so resume with the same "
      "method and number of processes, or start afresh with run.resume = \"never\"",
      dir, method, saved_replicas, config.sync.method, replicas));
}

// Every rank opens the newest valid checkpoint (verifying 1/N of its files) and reads the
// regions of each tensor it holds under this run's strategy and degree, whatever layout wrote
// them. Then the checkpointer is set up, once, with the same pieces.
void Trainer::restore() {
  Stopwatch watch;
  std::string dir;
  std::optional<SavedState> saved;
  std::vector<StatePiece> pieces = sync_->checkpoint_pieces();
  if (config_.run.resume == "auto") {
    auto check = [&](const SavedState& s, const std::string& d) {
      check_sync_record(s.extra.contains("sync") ? s.extra.at("sync") : nlohmann::json::object(),
                        config_, dp_size_, d);
    };
    saved = load_latest_checkpoint(folder_.checkpoints(), group_.world.get(), pieces, &dir, check);
  }
  sync_->after_restore(saved.has_value());
  if (saved) {
    if (saved->extra.contains("sampler")) {
      loader_.sampler().resume_step(saved->extra.at("sampler").get<SamplerState>());
    }
    start_step_ = saved->step;
    updates_ = saved->updates;
    last_checkpoint_ = dir;
    log_.info("resumed from {} at step {} (loaded in {:.0f} ms)", last_checkpoint_, start_step_,
              watch.millis());
  }
  ckpt_ = std::make_unique<TrainingCheckpointer>(
      TrainingCheckpointOptions{
          .root = folder_.checkpoints(),
          .keep_last = static_cast<int>(config_.train.keep_checkpoints),
          .async = config_.train.async_checkpoint,
          .tokenizer_file = data_.tokenizer_file,
          .mesh = {{"dp", dp_size_}, {"zero", sync_->zero_stage()}, {"sync", config_.sync.method}}},
      group_.world.get(), group_.world_options, std::move(pieces));
}

void Trainer::start_or_resume() {
  log_.info("run folder {}; process {} of {} ({}), data parallel over {}{}", folder_.root, rank_,
            group_.size(), group_.env.source, dp_size_,
            sync_->zero_stage() > 0 ? fmt::format(" with ZeRO-{}", sync_->zero_stage())
            : config_.parallel.zero > 0 && dp_size_ == 1
                ? " (parallel.zero ignored: one process has nothing to shard)"
                : "");
  log_.info("replicas sync by {}{}", describe_sync(config_.sync, config_.parallel),
            config_.sync.method != "ddp" && !replica_
                ? " (ignored: one process has no replica to sync with; plain local training)"
                : "");
  log_.info("{}", data_.summary);
  log_.info(
      "model {}: {} parameters; optimizer {}; {} steps x {} micro-batches x {} ranks x {} "
      "examples{}",
      config_.model.kind, model_->num_params(), config_.train.optimizer, config_.train.steps,
      config_.train.grad_accum, dp_size_, config_.train.micro_batch,
      tokens_per_example() > 1 ? fmt::format(" of {} tokens", config_.context()) : "");
  model_->initialize(static_cast<uint64_t>(config_.run.seed));
  restore();
  if (rank_ == 0) {
    provenance_ = provenance(config_, data_.source_files);
    provenance_["world_size"] = group_.size();
    provenance_["launcher"] = group_.env.source;
    write_run_manifest(folder_, provenance_);
  }
}

float Trainer::average_over_ranks(float value) {
  if (group_.world) group_.world->all_reduce(&value, 1, ReduceOp::kAvg);
  return value;
}

bool Trainer::train_step(int64_t step) {
  const int64_t accum = config_.train.grad_accum;
  sync_->start_step();
  double loss = 0;
  for (int64_t j = 0; j < accum; ++j) {
    loader_.next(batch_, step, j);
    loss += model_->forward(batch_);
    sync_->before_backward(j == accum - 1);
    model_->backward(batch_, 1.0f / static_cast<float>(accum));
  }
  last_exposed_comm_s_ = sync_->finish_gradients();
  double norm = 0;
  if (replica_) {
    // Loss and squared norm in one all-reduce (none when replicas step independently).
    float mean_loss = static_cast<float>(loss / static_cast<double>(accum));
    norm = std::sqrt(replica_->reduce_step_scalars(&mean_loss));
    loss = mean_loss;
  } else {
    loss = average_over_ranks(static_cast<float>(loss / static_cast<double>(accum)));
    // Collective under ZeRO (each rank holds one shard of the gradient), so every rank takes it
    // before deciding anything from it.
    norm = std::sqrt(sync_->grad_sum_squares());
  }
  if (step + 1 == nan_step_) loss = std::nan("");
  last_loss_ = loss;
  last_norm_ = norm;
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    std::string what =
        fmt::format("non-finite {} ({}) at step {}", std::isfinite(loss) ? "gradient norm" : "loss",
                    std::isfinite(loss) ? norm : loss, step + 1);
    progress_.interrupt();
    if (config_.train.on_nonfinite == "stop") {
      finish_checkpoints();  // a save in flight may become the last good checkpoint
      throw NonFiniteError(
          fmt::format("{}; stopping. The last good checkpoint is {}", what, last_checkpoint_));
    }
    log_.info("{}; skipping this update (train.on_nonfinite = \"skip\")", what);
    ++skipped_;
    return false;
  }
  if (config_.train.grad_clip > 0) {
    float scale = clip_scale(norm, static_cast<float>(config_.train.grad_clip));
    if (scale < 1.0f) sync_->scale_grads(scale);
  }
  ++updates_;
  sync_->step(lr_at(schedule_, step), updates_);
  return true;
}

void Trainer::eval_and_record(int64_t step, bool final) {
  // Ranks evaluate different numbers of batches, so parameters sharded by ZeRO-3 are gathered
  // once for the whole pass instead of layer by layer (which would need every rank's forwards).
  sync_->begin_full_params();
  EvalSums sums = evaluate(*model_, *data_.val, eval_batch_, config_.train.micro_batch,
                           config_.train.eval_batches, rank_, dp_size_);
  sync_->end_full_params();
  if (group_.world) {
    float v[3] = {static_cast<float>(sums.loss_sum), static_cast<float>(sums.examples),
                  static_cast<float>(sums.correct)};
    group_.world->all_reduce(v, 3, ReduceOp::kSum);
    sums = EvalSums{.loss_sum = v[0], .examples = v[1], .correct = v[2]};
  }
  nlohmann::json rec = {{"step", step}, {"val_loss", sums.loss()}, {"val_examples", sums.examples}};
  std::string line = fmt::format("step {}: validation loss {:.4f}", step, sums.loss());
  if (data_.tokenizer) {
    double bpb = sums.loss() / std::log(2.0) / data_.val_bytes_per_token;
    rec["val_bits_per_byte"] = bpb;
    line += fmt::format(" = {:.3f} bits/byte (unigram baseline {:.3f})", bpb,
                        data_.unigram_bits_per_byte);
    if (final) summary_["unigram_bits_per_byte"] = data_.unigram_bits_per_byte;
  }
  if (config_.model.kind == "mlp") {
    rec["val_accuracy"] = sums.accuracy();
    line += fmt::format(", accuracy {:.2f}%", 100 * sums.accuracy());
  }
  if (final) summary_.update(rec);
  record(rec);
  progress_.interrupt();
  log_.line(line);
}

// Every rank saves its own pieces (ckpt/async_save.h): with train.async_checkpoint the step
// waits only for the copy into host memory, and the write and commit finish in the background.
// A failed save is reported when it is found and retried by the next checkpoint.
void Trainer::checkpoint(int64_t step) {
  SavedState state{.step = step,
                   .updates = updates_,
                   .extra = {{"sampler", loader_.sampler().state(step)},
                             {"sync", sync_record(config_, dp_size_)},
                             {"config", config_.to_toml()},
                             {"provenance", provenance_}}};
  const std::vector<SaveResult> done = ckpt_->save(state);
  progress_.interrupt();
  for (const SaveResult& r : done) report_save(r);
  if (config_.train.async_checkpoint) {
    log_.info("checkpoint of step {} started ({:.0f} ms blocking)", step,
              ckpt_->last_blocking_s() * 1e3);
  }
}

void Trainer::report_save(const SaveResult& r) {
  if (r.ok) {
    last_checkpoint_ = r.dir;
    log_.info("checkpoint {} ({:.0f} ms)", r.dir, r.seconds * 1e3);
  } else {
    log_.info(
        "checkpoint of step {} failed: {}; {} stays the latest, the next checkpoint "
        "retries",
        r.step, r.error, last_checkpoint_);
  }
}

void Trainer::finish_checkpoints() {
  if (auto r = ckpt_->wait()) report_save(*r);
}

int Trainer::run() {
  start_or_resume();
  const TrainConfig& t = config_.train;
  const int64_t stop = config_.run.stop_after;
  const int64_t end = stop > 0 ? std::min(t.steps, start_step_ + stop) : t.steps;
  const double tokens_per_step =
      static_cast<double>(t.micro_batch * t.grad_accum * dp_size_) * tokens_per_example();
  CommStats* stats = group_.world ? &group_.world->stats() : nullptr;
  Stopwatch run_watch;
  int64_t last_saved = start_step_;
  for (int64_t step = start_step_; step < end; ++step) {
    const OpCounters before = stats ? stats->total() : OpCounters{};
    Stopwatch step_watch;
    const bool applied = train_step(step);
    const int64_t done = step + 1;
    Traffic formula;
    if (replica_) {
      // Bytes by formula: the loss and norm all-reduce and the method's exchange; on the last
      // step also the final sync of replicas that drift (DiLoCo).
      formula = replica_->step_traffic(applied, updates_);
      if (done == t.steps) formula = formula + replica_->finish_training(updates_);
      formula_total_ = formula_total_ + formula;
    }
    const double ms = step_watch.millis();
    const double lr = lr_at(schedule_, step);
    nlohmann::json rec = {{"step", done},
                          {"loss", last_loss_},
                          {"lr", lr},
                          {"grad_norm", last_norm_},
                          {"tokens_per_s", tokens_per_step / (ms / 1e3)},
                          {"ms_per_step", ms},
                          {"skipped", !applied}};
    if (stats) {
      const OpCounters after = stats->total();
      rec["comm_sent_bytes"] = after.bytes_sent - before.bytes_sent;
      rec["comm_recv_bytes"] = after.bytes_received - before.bytes_received;
      rec["comm_rounds"] = after.rounds - before.rounds;
      rec["comm_exposed_ms"] = last_exposed_comm_s_ * 1e3;
    }
    if (const MoeTotals moe = model_->take_moe_totals(); !moe.empty()) {
      // Rank 0's micro-batches: the aux part of `loss`, assignments over capacity, and the
      // mean over MoE layers of max expert load / mean load (1 = balanced).
      rec["moe_aux_loss"] = moe.mean_aux_term();
      rec["moe_dropped_pct"] = moe.dropped_pct();
      rec["moe_load_imbalance"] = moe.mean_imbalance();
    }
    if (replica_) {
      rec["comm_formula_sent_bytes"] = formula.sent;
      rec["comm_formula_recv_bytes"] = formula.received;
      rec["comm_formula_rounds"] = formula.rounds;
    }
    record(rec);
    const double avg_s = run_watch.seconds() / static_cast<double>(done - start_step_);
    if (rank_ == 0) {
      log_line(progress_.update({.step = done,
                                 .total = t.steps,
                                 .loss = last_loss_,
                                 .lr = lr,
                                 .grad_norm = last_norm_,
                                 .tokens_per_s = tokens_per_step / (ms / 1e3),
                                 .ms_per_step = ms,
                                 .eta_s = avg_s * static_cast<double>(end - done)}));
    }
    if (t.eval_every > 0 && done % t.eval_every == 0 && done != t.steps) {
      eval_and_record(done, false);
    }
    if (t.ckpt_every > 0 && done % t.ckpt_every == 0) {
      checkpoint(done);
      last_saved = done;
    }
  }
  progress_.interrupt();
  if (end < t.steps) {
    if (last_saved != end) checkpoint(end);
    finish_checkpoints();
    log_.info("stopped after step {} of {} (run.stop_after = {}); run again to continue", end,
              t.steps, stop);
    return kExitOk;
  }
  eval_and_record(t.steps, true);
  if (last_saved != t.steps) checkpoint(t.steps);
  finish_checkpoints();
  summary_["final"] = true;
  summary_["skipped_steps"] = skipped_;
  summary_["wall_s"] = run_watch.seconds();
  summary_["sync_method"] = config_.sync.method;
  if (const MoeTotals moe = model_->moe_run_totals(); !moe.empty()) {
    summary_["moe_dropped_pct"] = moe.dropped_pct();  // this invocation's steps, rank 0
    summary_["moe_load_imbalance"] = moe.mean_imbalance();
    summary_["moe_load_imbalance_max"] = moe.imbalance_max;
  }
  if (stats) {
    summary_["comm"] = stats->summary();
    summary_["comm_sent_bytes"] = stats->total().bytes_sent;
    summary_["comm_recv_bytes"] = stats->total().bytes_received;
    summary_["comm_rounds"] = stats->total().rounds;
  }
  if (replica_) {
    summary_["comm_formula_sent_bytes"] = formula_total_.sent;
    summary_["comm_formula_recv_bytes"] = formula_total_.received;
  }
  record(summary_);
  log_.info("done: {} steps in {}; summary {}", t.steps - start_step_,
            format_duration(run_watch.seconds()), summary_.dump());
  return kExitOk;
}

}  // namespace

int train(const Config& config) {
  set_blas_threads(static_cast<int>(config.train.blas_threads));
  ProcessGroup group = join_process_group(config.comm, detect_dist_env());
  detail::set_log_rank(group.rank());
  // tp * pp > 1: the GPT as pipeline stages of tensor-parallel shards (model_parallel_trainer.h).
  if (is_model_parallel(config)) return train_model_parallel(config, group);
  Trainer trainer(config, group);
  return trainer.run();
}

}  // namespace brigade
