// The training loop of one process. Each step: zero the gradients, run grad_accum micro-steps
// of forward + backward (each scaled by 1/grad_accum), stop or skip on a non-finite loss,
// clip the global gradient norm, update with the scheduled learning rate, record metrics;
// evaluate and checkpoint on schedule.
#include "brigade/train/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <memory>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/metrics.h"
#include "brigade/monitor/progress.h"
#include "brigade/monitor/timer.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/sync/grad_clip.h"
#include "brigade/sync/lr_schedule.h"
#include "brigade/sync/optimizer.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/evaluate.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/training_data.h"

namespace brigade {

namespace {

// Test hook: BRIGADE_FAULT_NAN_STEP=N makes the loss of step N (1-based) NaN, as a diverging
// run would, to exercise the non-finite path end to end.
int64_t injected_nan_step() {
  const char* v = std::getenv("BRIGADE_FAULT_NAN_STEP");
  return v ? std::atoll(v) : -1;
}

OptimizerConfig optimizer_config(const TrainConfig& t) {
  OptimizerConfig o;
  o.name = t.optimizer;
  o.beta1 = static_cast<float>(t.beta1);
  o.beta2 = static_cast<float>(t.beta2);
  o.eps = static_cast<float>(t.eps);
  o.weight_decay = static_cast<float>(t.weight_decay);
  o.momentum = static_cast<float>(t.momentum);
  o.nesterov = t.nesterov;
  return o;
}

class Trainer {
 public:
  explicit Trainer(const Config& config)
      : config_(config),
        folder_(create_run_folder(config)),
        log_(0, folder_.log_path()),
        data_(load_training_data(config, folder_)),
        model_(make_model(config.model, config.train.micro_batch)),
        optimizer_(make_optimizer(optimizer_config(config.train), model_->layout(), 0,
                                  model_->num_params())),
        loader_(*data_.train, SamplerOptions{.seed = static_cast<uint64_t>(config.run.seed),
                                             .micro_batch = config.train.micro_batch,
                                             .grad_accum = config.train.grad_accum}),
        batch_(loader_.make_batch()),
        eval_batch_(data_.val->make_batch(config.train.micro_batch)),
        metrics_(folder_.metrics_path()),
        progress_(config.train.log_every) {
    schedule_ = LrSchedule{.max_lr = static_cast<float>(config.train.lr),
                           .min_lr = static_cast<float>(config.train.min_lr),
                           .warmup = config.train.warmup,
                           .total = config.train.steps};
    schedule_.validate();
  }

  int run();

 private:
  void start_or_resume();
  bool train_step(int64_t step);  // false: the step was skipped (non-finite)
  EvalResult eval_and_record(int64_t step);
  std::string checkpoint(int64_t step);
  nlohmann::json checkpoint_extra(int64_t step) const;
  double tokens_per_example() const {
    return config_.model.kind == "gpt" ? static_cast<double>(config_.context()) : 1.0;
  }

  Config config_;
  RunFolder folder_;
  Log log_;
  TrainingData data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  DataLoader loader_;
  Batch batch_;
  Batch eval_batch_;
  MetricsWriter metrics_;
  Progress progress_;
  LrSchedule schedule_;
  nlohmann::json provenance_;

  int64_t start_step_ = 0;
  int64_t updates_ = 0;
  int64_t skipped_ = 0;
  int64_t nan_step_ = injected_nan_step();
  std::string last_checkpoint_ = "none";
  double last_loss_ = 0, last_norm_ = 0;
};

void Trainer::start_or_resume() {
  log_.info("run folder {}", folder_.root);
  log_.info("{}", data_.summary);
  log_.info("model {}: {} parameters; optimizer {}; {} steps of {} x {} micro-batches of {}",
            config_.model.kind, model_->num_params(), config_.train.optimizer,
            config_.train.steps, config_.train.micro_batch, config_.train.grad_accum,
            tokens_per_example() > 1 ? fmt::format("{}-token sequences", config_.context()) : "examples");
  model_->initialize(static_cast<uint64_t>(config_.run.seed));
  if (config_.run.resume == "auto") {
    std::string dir;
    if (auto saved = load_latest_checkpoint(folder_.checkpoints(), *model_, *optimizer_, &dir)) {
      if (saved->extra.contains("sampler")) {
        loader_.sampler().resume_step(saved->extra.at("sampler").get<SamplerState>());
      }
      start_step_ = saved->step;
      updates_ = saved->updates;
      last_checkpoint_ = dir;
      log_.info("resumed from {} at step {}", dir, start_step_);
    }
  }
  provenance_ = provenance(config_, data_.source_files);
  write_run_manifest(folder_, provenance_);
}

bool Trainer::train_step(int64_t step) {
  const int64_t accum = config_.train.grad_accum;
  model_->zero_grads();
  double loss = 0;
  for (int64_t j = 0; j < accum; ++j) {
    loader_.next(batch_, step, j);
    loss += model_->forward(batch_);
    model_->backward(batch_, 1.0f / static_cast<float>(accum));
  }
  loss /= static_cast<double>(accum);
  if (step + 1 == nan_step_) loss = std::nan("");
  const int64_t n = model_->num_params();
  double norm = std::sqrt(grad_sum_squares(model_->grads(), n));
  last_loss_ = loss;
  last_norm_ = norm;
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    std::string what = fmt::format("non-finite {} ({}) at step {}",
                                   std::isfinite(loss) ? "gradient norm" : "loss",
                                   std::isfinite(loss) ? norm : loss, step + 1);
    if (config_.train.on_nonfinite == "stop") {
      progress_.interrupt();
      throw NonFiniteError(fmt::format("{}; stopping. The last good checkpoint is {}", what,
                                       last_checkpoint_));
    }
    progress_.interrupt();
    log_.info("{}; skipping this update (train.on_nonfinite = \"skip\")", what);
    ++skipped_;
    return false;
  }
  if (config_.train.grad_clip > 0) {
    float scale = clip_scale(norm, static_cast<float>(config_.train.grad_clip));
    if (scale < 1.0f) scale_grads(model_->grads(), n, scale);
  }
  ++updates_;
  optimizer_->step(model_->params(), model_->grads(), 0, n, lr_at(schedule_, step), updates_);
  return true;
}

EvalResult Trainer::eval_and_record(int64_t step) {
  EvalResult r = evaluate(*model_, *data_.val, eval_batch_, config_.train.micro_batch,
                          config_.train.eval_batches);
  nlohmann::json rec = {{"step", step}, {"val_loss", r.loss}, {"val_examples", r.examples}};
  std::string line = fmt::format("step {}: validation loss {:.4f}", step, r.loss);
  if (data_.tokenizer) {
    double bpb = r.loss / std::log(2.0) / data_.val_bytes_per_token;
    rec["val_bits_per_byte"] = bpb;
    line += fmt::format(" = {:.3f} bits/byte (unigram baseline {:.3f})", bpb,
                        data_.unigram_bits_per_byte);
  }
  if (r.accuracy >= 0) {
    rec["val_accuracy"] = r.accuracy;
    line += fmt::format(", accuracy {:.2f}%", 100 * r.accuracy);
  }
  metrics_.write(rec);
  progress_.interrupt();
  log_.line(line);
  return r;
}

nlohmann::json Trainer::checkpoint_extra(int64_t step) const {
  return {{"sampler", loader_.sampler().state(step)},
          {"config", config_.to_toml()},
          {"provenance", provenance_}};
}

std::string Trainer::checkpoint(int64_t step) {
  Stopwatch watch;
  SavedState state{.step = step, .updates = updates_, .extra = checkpoint_extra(step)};
  last_checkpoint_ =
      save_checkpoint(folder_.checkpoints(), state, *model_, *optimizer_,
                      static_cast<int>(config_.train.keep_checkpoints), data_.tokenizer_file);
  progress_.interrupt();
  log_.info("checkpoint {} ({:.0f} ms)", last_checkpoint_, watch.millis());
  return last_checkpoint_;
}

int Trainer::run() {
  start_or_resume();
  const TrainConfig& t = config_.train;
  const int64_t end = config_.run.stop_after > 0 ? std::min(t.steps, start_step_ + config_.run.stop_after) : t.steps;
  const double tokens_per_step = static_cast<double>(t.micro_batch * t.grad_accum) *
                                 tokens_per_example();
  Stopwatch run_watch;
  int64_t last_saved = start_step_;
  for (int64_t step = start_step_; step < end; ++step) {
    Stopwatch step_watch;
    bool applied = train_step(step);
    double ms = step_watch.millis();
    const int64_t done = step + 1;
    double lr = lr_at(schedule_, step);
    metrics_.write({{"step", done},
                    {"loss", last_loss_},
                    {"lr", lr},
                    {"grad_norm", last_norm_},
                    {"tokens_per_s", tokens_per_step / (ms / 1e3)},
                    {"ms_per_step", ms},
                    {"skipped", !applied}});
    double avg_s = run_watch.seconds() / static_cast<double>(done - start_step_);
    std::string line = progress_.update({.step = done,
                                         .total = t.steps,
                                         .loss = last_loss_,
                                         .lr = lr,
                                         .grad_norm = last_norm_,
                                         .tokens_per_s = tokens_per_step / (ms / 1e3),
                                         .ms_per_step = ms,
                                         .eta_s = avg_s * static_cast<double>(end - done)});
    if (!line.empty()) progress_.on_terminal() ? log_.file_only(line) : log_.line(line);
    if (t.eval_every > 0 && done % t.eval_every == 0 && done != t.steps) eval_and_record(done);
    if (t.ckpt_every > 0 && done % t.ckpt_every == 0) {
      checkpoint(done);
      last_saved = done;
    }
  }
  progress_.interrupt();
  if (end < t.steps) {
    if (last_saved != end) checkpoint(end);
    log_.info("stopped after step {} of {} (run.stop_after = {}); run again to continue", end,
              t.steps, config_.run.stop_after);
    return kExitOk;
  }
  EvalResult final_eval = eval_and_record(t.steps);
  if (last_saved != t.steps) checkpoint(t.steps);
  nlohmann::json summary = {{"final", true},
                            {"step", t.steps},
                            {"val_loss", final_eval.loss},
                            {"skipped_steps", skipped_},
                            {"wall_s", run_watch.seconds()}};
  if (data_.tokenizer) {
    summary["val_bits_per_byte"] = final_eval.loss / std::log(2.0) / data_.val_bytes_per_token;
    summary["unigram_bits_per_byte"] = data_.unigram_bits_per_byte;
  }
  if (final_eval.accuracy >= 0) summary["val_accuracy"] = final_eval.accuracy;
  metrics_.write(summary);
  log_.info("done: {} steps in {}; summary {}", t.steps - start_step_,
            format_duration(run_watch.seconds()), summary.dump());
  return kExitOk;
}

}  // namespace

int train(const Config& config) {
  set_blas_threads(static_cast<int>(config.train.blas_threads));
  Trainer trainer(config);
  return trainer.run();
}

}  // namespace brigade
