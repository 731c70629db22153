#include "brigade/train/training_loop.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/host.h"
#include "brigade/base/stop_after.h"
#include "brigade/base/trace.h"
#include "brigade/ckpt/json_exchange.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/kernel_isa.h"
#include "brigade/monitor/energy.h"
#include "brigade/monitor/gemm_calibration.h"
#include "brigade/monitor/metrics.h"
#include "brigade/monitor/progress.h"
#include "brigade/monitor/summary_table.h"
#include "brigade/monitor/tensorboard_writer.h"
#include "brigade/monitor/timer.h"
#include "brigade/optim/grad_clip.h"
#include "brigade/optim/lr_schedule.h"
#include "brigade/runtime/config_diff.h"
#include "brigade/runtime/interrupt.h"
#include "brigade/train/model_flops.h"
#include "brigade/train/straggler_watch.h"

namespace brigade {

namespace {

// The final checkpoint is retried this many times, after 1x, 2x, ... this wait.
constexpr int kFinalSaveRetries = 1;
constexpr double kFinalSaveRetryWaitS = 2.0;

// Test hook: BRIGADE_FAULT_NAN_STEP=N makes the loss of step N (1-based) NaN, as a diverging
// run would, to exercise the non-finite path end to end.
int64_t injected_nan_step() {
  const char* v = std::getenv("BRIGADE_FAULT_NAN_STEP");
  return v ? std::atoll(v) : -1;
}

class TrainingLoop {
 public:
  TrainingLoop(TrainContext& ctx, TrainEngine& engine)
      : ctx_(ctx),
        config_(ctx.config),
        engine_(engine),
        rank_(ctx.rank),
        log_(ctx.log),
        progress_(config_.train.log_every),
        straggler_(ctx.group.world.get(), config_.train.straggler_threshold,
                   engine.replicas_wait_each_step(), ctx.log) {
    if (rank_ == 0) {
      metrics_ = std::make_unique<MetricsWriter>(ctx.folder.metrics_path());
      tb_ = std::make_unique<TensorBoardWriter>(ctx.folder.tensorboard_dir());
    }
    schedule_ = LrSchedule{.max_lr = static_cast<float>(config_.train.lr),
                           .min_lr = static_cast<float>(config_.train.min_lr),
                           .warmup = config_.train.warmup,
                           .total = config_.train.steps};
    schedule_.validate();
  }

  int run();

 private:
  void start_or_resume();
  void log_config_changes(const nlohmann::json& saved) const;
  void restore();
  bool train_step(int64_t step);  // false: the step was skipped (non-finite)
  void eval_and_record(int64_t step, bool final);
  void checkpoint(int64_t step, bool last = false);  // last: the invocation's final step
  void report_save(const SaveResult& result, bool last = false);
  void finish_checkpoints(bool last = false);  // waits for the save in flight
  void finish_final_checkpoint(int64_t step);
  // The checkpoint of the step an invocation ends on (the end, run.stop_after or a signal),
  // unless the periodic one of that step was started already (started: the step of the last
  // save started), waited for and retried as finish_final_checkpoint() does.
  void save_final_checkpoint(int64_t step, int64_t started);
  // The signal every rank agrees to stop on after this step (runtime/interrupt.h), or 0.
  int agreed_interrupt() const;
  // Saves step `done` (unless saved), waits for it and returns 128 + signo.
  int stop_on_interrupt(int64_t done, int signo, int64_t last_saved);
  // Appends to metrics.jsonl (rank 0); type: "train", "eval", "event", "summary".
  void record(std::string_view type, const nlohmann::json& rec);
  void report_metrics_failure();
  void add_energy(nlohmann::json& rec, double tokens, double compute_s);
  void add_energy_summary();
  std::vector<double> peak_rss_mib_per_rank();
  void write_trace();
  void log_progress(const std::string& line) {
    if (line.empty() || rank_ != 0) return;
    progress_.on_terminal() ? log_.file_only(line) : log_.line(line);
  }
  double tokens_per_example() const {
    return config_.model.kind == ModelKind::kGpt ? static_cast<double>(config_.context()) : 1.0;
  }

  TrainContext& ctx_;
  const Config& config_;
  TrainEngine& engine_;
  int rank_;
  Log& log_;
  std::unique_ptr<MetricsWriter> metrics_;  // rank 0 only
  std::unique_ptr<TensorBoardWriter> tb_;   // rank 0 only: the same scalars for TensorBoard
  Progress progress_;
  LrSchedule schedule_;
  StragglerWatch straggler_;
  CommByAxis comm_;  // every communicator the engine trains with, by group and operation
  nlohmann::json provenance_;
  nlohmann::json summary_;

  int64_t start_step_ = 0;
  bool already_complete_ = false;  // resumed at or past train.steps: nothing to do
  int64_t updates_ = 0;
  int64_t skipped_ = 0;
  int64_t nan_step_ = injected_nan_step();
  std::string last_checkpoint_ = "none";
  int64_t last_saved_step_ = -1;                // the step of last_checkpoint_; -1: none
  std::unique_ptr<TrainingCheckpointer> ckpt_;  // after restore(): saves this rank's pieces
  StepGradients last_;
  double flops_per_step_ = 0;  // model FLOPs of one step, all ranks (train/model_flops.h)
  // Rank 0: the packages' counters when every rank runs on this machine (monitor/energy.h).
  std::optional<RaplReader> rapl_;
  double energy_j_ = 0;    // this invocation's, all ranks
  double peak_flops_ = 1;  // this rank's, for MFU: monitor.peak_flops or measured
};

// Every rank opens the newest valid checkpoint (verifying 1/N of its files) and reads the
// regions of each tensor it holds under this run's layout, whatever layout wrote them. Then the
// checkpointer is set up, once, with the same pieces.
void TrainingLoop::restore() {
  Stopwatch watch;
  std::string dir;
  std::optional<SavedState> saved;
  std::vector<StatePiece> pieces = engine_.checkpoint_pieces();
  if (config_.run.resume == ResumeMode::kAuto) {
    auto check = [&](const SavedState& s, const std::string& d) { engine_.check_resume(s, d); };
    const ParamLayout legacy = engine_.checkpoint_layout();
    std::vector<std::string> rejections;  // already on stderr; train.log keeps them too
    saved = load_latest_checkpoint(ctx_.folder.checkpoints(), ctx_.group.world.get(), pieces, &dir,
                                   check, &rejections, &legacy);
    for (const std::string& r : rejections) log_.file_only("warning: " + r);
  }
  engine_.set_start_step(saved ? saved->step : 0);
  const std::string& init_from = config_.train.init_from;
  if (!saved && !init_from.empty()) {
    int64_t source_step = 0;
    const std::string source =
        load_initial_weights(init_from, ctx_.group.world.get(), pieces, &source_step);
    log_.info(
        "weights from {} (its step {}); optimizer state, schedule and data start afresh "
        "at step 0 (train.init_from)",
        source, source_step);
    engine_.after_initial_weights();
  } else if (saved && !init_from.empty()) {
    log_.info("train.init_from = \"{}\" is not used: the run resumes from its own checkpoint",
              init_from);
  }
  if (saved || init_from.empty()) engine_.after_restore(saved.has_value());
  if (saved) {
    if (saved->extra.contains("sampler")) {
      engine_.loader().sampler().resume_step(saved->extra.at("sampler").get<SamplerState>());
    }
    start_step_ = saved->step;
    updates_ = saved->updates;
    last_checkpoint_ = dir;
    last_saved_step_ = saved->step;
    log_.info("resumed from {} at step {} (loaded in {:.0f} ms)", last_checkpoint_, start_step_,
              watch.millis());
    log_config_changes(saved->extra);
  }
  if (const std::optional<int64_t> joined = engine_.joined_step()) {
    log_.info(
        "joined the running job at step {} (a restarted parameter-server worker: the servers "
        "hold the weights and its clock)",
        *joined);
    start_step_ = *joined;
    updates_ = *joined;
  }
  // Ranks that step with no collective (parameter-server workers under ssp/asp): worker 0
  // alone saves, as it alone declares the pieces.
  if (!ctx_.group.world && rank_ != 0) return;
  ckpt_ = std::make_unique<TrainingCheckpointer>(
      TrainingCheckpointOptions{.root = ctx_.folder.checkpoints(),
                                .keep_last = static_cast<int>(config_.train.keep_checkpoints),
                                .async = config_.train.async_checkpoint,
                                .tokenizer_file = ctx_.data.tokenizer_file,
                                .mesh = engine_.checkpoint_mesh()},
      ctx_.group.world.get(), ctx_.group.world_options, std::move(pieces));
}

// Every key the resumed run changed against the checkpoint's config, said once. What resuming
// refuses (another model shape, global batch, seed or low-communication layout) has stopped the
// run before this with its own reason, so these changes were all accepted.
void TrainingLoop::log_config_changes(const nlohmann::json& saved) const {
  const auto it = saved.find("config");
  if (it == saved.end() || !it->is_string()) return;
  try {
    const std::vector<ConfigChange> changes = config_changes(it->get<std::string>(), config_);
    if (!changes.empty()) {
      log_.info("the config differs from the checkpoint's (accepted; in effect from step {}): {}",
                start_step_ + 1, describe_changes(changes));
    }
  } catch (const ConfigError& e) {
    log_.info("the checkpoint's config cannot be compared with this one: {}", e.what());
  }
}

void TrainingLoop::start_or_resume() {
  engine_.log_layout();
  log_.info("{}", ctx_.data.summary);
  engine_.log_model();
  log_.info("kernels: GEMMs on {}; {}", gemm_backend_description(), elementwise_isa_description());
  if (ctx_.group.world)
    log_.info("collectives: {}", transport_description(ctx_.group.world_options));
  engine_.initialize(static_cast<uint64_t>(config_.run.seed));
  restore();
  // Run again after its last step, a finished run has nothing to do: say so, and leave its
  // metrics, manifest and checkpoints as they are.
  if (start_step_ > 0 && start_step_ >= config_.train.steps) {
    already_complete_ = true;
    log_.info(
        "{} is already complete: step {} of train.steps = {}; nothing to train (raise "
        "train.steps to continue it, or choose another run.name)",
        ctx_.folder.root, start_step_, config_.train.steps);
    return;
  }
  flops_per_step_ = static_cast<double>(engine_.examples_per_step()) *
                    train_flops_per_example(config_.model, engine_.num_params());
  peak_flops_ = config_.monitor.peak_flops;
  if (peak_flops_ <= 0 && rank_ == 0) {  // only rank 0 reports MFU
    const std::string setup =
        fmt::format("{} {} {} thread(s)", gemm_backend_name(gemm_backend()),
                    gemm_precision_name(gemm_precision()), config_.train.blas_threads);
    const GemmPeak peak = gemm_peak_flops(setup);
    peak_flops_ = peak.flops;
    log_.info(
        "GEMM peak {:.1f} GFLOP/s on this rank ({}){}: MFU is relative to it (set "
        "monitor.peak_flops to fix it)",
        peak_flops_ / 1e9, setup,
        peak.cache.empty()
            ? std::string()
            : fmt::format(", the best measured on this machine (this start: {:.1f}; {})",
                          peak.measured / 1e9, peak.cache));
  }
  if (rank_ == 0 && ctx_.group.env.local_world_size == ctx_.group.size()) {
    RaplReader rapl;
    if (rapl.available()) rapl_ = std::move(rapl);
  }
  if (metrics_) {
    nlohmann::json details = {{"world_size", ctx_.group.size()}};
    if (start_step_ > 0) details["checkpoint"] = last_checkpoint_;
    if (!metrics_->begin_segment(start_step_, std::move(details))) report_metrics_failure();
  }
  if (tb_) {
    // TensorBoard drops the points at and after a START's step: those trained again.
    if (start_step_ > 0) tb_->start_session(start_step_ + 1, last_checkpoint_);
    // The text plugin renders markdown: indented lines are shown as they are.
    std::string text;
    std::istringstream toml(config_.to_toml());
    for (std::string line; std::getline(toml, line);) text += "    " + line + "\n";
    tb_->add_text(start_step_, "config", text);
  }
  if (rank_ == 0) {
    provenance_ = provenance(config_, ctx_.data.source_files);
    provenance_["world_size"] = ctx_.group.size();
    provenance_["launcher"] = ctx_.group.env.source;
    provenance_["kernels"] = gemm_backend_description();
    provenance_["elementwise_isa"] = kernel_isa_name(elementwise_isa());
    engine_.add_provenance(provenance_);
    write_run_manifest(ctx_.folder, provenance_);
    // config.toml and manifest.json describe the latest invocation; each segment keeps its own.
    write_segment_record(ctx_.folder, start_step_, config_, provenance_);
  }
}

bool TrainingLoop::train_step(int64_t step) {
  {
    const TraceSpan span("compute", "gradients (forward, backward, reduction)");
    last_ = engine_.compute_gradients(step);
  }
  if (step + 1 == nan_step_) last_.loss = std::nan("");
  const double loss = last_.loss, norm = last_.norm;
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    std::string what =
        fmt::format("non-finite {} ({}) at step {}", std::isfinite(loss) ? "gradient norm" : "loss",
                    std::isfinite(loss) ? norm : loss, step + 1);
    progress_.interrupt();
    if (config_.train.on_nonfinite == OnNonfinite::kStop) {
      finish_checkpoints();  // a save in flight may become the last good checkpoint
      throw NonFiniteError(
          fmt::format("{}; stopping. The last good checkpoint is {}", what, last_checkpoint_));
    }
    log_.info("{}; skipping this update (train.on_nonfinite = \"skip\")", what);
    ++skipped_;
    engine_.skip_update(updates_);
    return false;
  }
  const TraceSpan span("compute", "update (clip, optimizer)");
  Stopwatch update;  // clipping and the optimizer: compute of this rank
  if (config_.train.grad_clip > 0) {
    const float scale = clip_scale(norm, static_cast<float>(config_.train.grad_clip));
    if (scale < 1.0f) engine_.scale_grads(scale);
  }
  // A handed-out slice counts as an update of the job's step (AdamW's bias correction).
  updates_ = engine_.assigns_steps() ? step + 1 : updates_ + 1;
  engine_.apply_update(lr_at(schedule_, step), updates_);
  last_.times.compute_s += update.seconds();
  return true;
}

void TrainingLoop::eval_and_record(int64_t step, bool final) {
  const EvalSums sums = engine_.evaluate();
  const TrainingData& data = ctx_.data;
  nlohmann::json rec = {{"step", step}, {"val_loss", sums.loss()}, {"val_examples", sums.examples}};
  std::string line = fmt::format("step {}: validation loss {:.4f}", step, sums.loss());
  if (data.tokenizer) {
    const double bpb = sums.loss() / std::log(2.0) / data.val_bytes_per_token;
    rec["val_bits_per_byte"] = bpb;
    line += fmt::format(" = {:.3f} bits/byte (unigram baseline {:.3f})", bpb,
                        data.unigram_bits_per_byte);
    if (final) summary_["unigram_bits_per_byte"] = data.unigram_bits_per_byte;
  }
  if (config_.model.is_classifier()) {
    rec["val_accuracy"] = sums.accuracy();
    line += fmt::format(", accuracy {:.2f}%", 100 * sums.accuracy());
  }
  if (final) summary_.update(rec);
  record("eval", rec);
  progress_.interrupt();
  log_.line(line);
}

// Every rank saves its own pieces (ckpt/async_save.h): with train.async_checkpoint the step
// waits only for the copy into host memory, and the write and commit finish in the background.
// A failed save is reported when it is found and retried by the next checkpoint.
void TrainingLoop::checkpoint(int64_t step, bool last) {
  if (!ckpt_) return;  // a rank that does not save (restore())
  engine_.prepare_checkpoint(step);
  SavedState state{.step = step, .updates = updates_, .extra = engine_.checkpoint_extra()};
  state.extra["sampler"] = engine_.loader().sampler().state(step);
  state.extra["config"] = config_.to_toml();
  state.extra["provenance"] = provenance_;
  const std::vector<SaveResult> done = ckpt_->save(state);
  progress_.interrupt();
  for (const SaveResult& r : done) report_save(r, last && r.step == step);
  if (config_.train.async_checkpoint) {
    log_.info("checkpoint of step {} started ({:.0f} ms blocking)", step,
              ckpt_->last_blocking_s() * 1e3);
  }
}

// A metrics record that cannot be written (a full disk) is logged the first time and counted
// in the summary, so the file's gaps are never silent.
void TrainingLoop::record(std::string_view type, const nlohmann::json& rec) {
  if (metrics_ && !metrics_->write(type, rec)) report_metrics_failure();
  if (tb_ && type != "event") tb_->add_scalars(rec.value("step", int64_t{0}), type, rec);
}

void TrainingLoop::report_metrics_failure() {
  if (metrics_->failures() > 1) return;
  progress_.interrupt();
  log_.info(
      "{}; metrics records that cannot be written are counted (summary "
      "metrics_write_failures), not logged again",
      metrics_->last_error());
}

void TrainingLoop::report_save(const SaveResult& r, bool last) {
  if (r.ok) {
    last_checkpoint_ = r.dir;
    last_saved_step_ = r.step;
    log_.info("checkpoint {} ({:.0f} ms)", r.dir, r.seconds * 1e3);
  } else {
    log_.info("checkpoint of step {} failed: {}; {} stays the latest{}", r.step, r.error,
              last_checkpoint_, last ? "" : ", the next checkpoint retries");
  }
}

void TrainingLoop::finish_checkpoints(bool last) {
  if (ckpt_) {
    if (auto r = ckpt_->wait()) report_save(*r, last);
  }
}

// The checkpoint of the step an invocation ends on has no next interval to retry it: it is
// retried after a short wait (a full disk may have been cleared by then), and if that fails
// too the run fails, naming the last saved step, because exit 0 would tell the user (or a
// scheduler) that every step is safe. Every rank sees the same agreed result.
void TrainingLoop::save_final_checkpoint(int64_t step, int64_t started) {
  if (started != step) checkpoint(step, true);
  finish_final_checkpoint(step);
}

void TrainingLoop::finish_final_checkpoint(int64_t step) {
  if (!ckpt_) return;
  finish_checkpoints(true);
  for (int attempt = 1; last_saved_step_ != step && attempt <= kFinalSaveRetries; ++attempt) {
    const double wait_s = kFinalSaveRetryWaitS * attempt;
    log_.info("retrying the checkpoint of step {} in {:.0f} s (attempt {} of {})", step, wait_s,
              attempt + 1, kFinalSaveRetries + 1);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    checkpoint(step, true);
    finish_checkpoints(true);
  }
  if (last_saved_step_ != step) {
    SaveError error(fmt::format(
        "the checkpoint of step {} could not be saved ({} attempts); the last saved step is {} "
        "({}): steps after it are lost. Free disk space and run the same command again to "
        "redo them",
        step, kFinalSaveRetries + 1, last_saved_step_ < 0 ? 0 : last_saved_step_,
        last_checkpoint_));
    log_.file_only(std::string("error: ") + error.what());  // the CLI prints it on stderr
    throw error;
  }
}

// The step's energy, all ranks: the packages' counters where they serve, else busy time at
// monitor.core_watts per core (the straggler exchange gives every rank's; without it, this
// rank's compute for each rank).
void TrainingLoop::add_energy(nlohmann::json& rec, double tokens, double compute_s) {
  std::optional<double> joules;
  if (rapl_) joules = rapl_->joules_since_last();
  rec["energy_estimated"] = !joules.has_value();
  if (!joules) {
    double busy_s = 0;
    if (straggler_.enabled()) {
      for (float b : straggler_.busy_s_per_rank()) busy_s += b;
    } else {
      busy_s = compute_s * ctx_.group.size();
    }
    joules = estimated_joules(busy_s, config_.train.blas_threads, config_.monitor.core_watts);
  }
  energy_j_ += *joules;
  rec["energy_j"] = *joules;
  rec["energy_j_per_token"] = *joules / tokens;
}

void TrainingLoop::add_energy_summary() {
  const bool measured = rapl_.has_value();
  summary_["energy_j"] = energy_j_;
  summary_["energy_kwh"] = kwh_of(energy_j_);
  summary_["co2_g"] = co2_grams_of(energy_j_, config_.monitor.grid_gco2_per_kwh);
  summary_["energy_source"] =
      measured ? "rapl" : fmt::format("estimated ({} W per busy core)", config_.monitor.core_watts);
  log_.info("energy: {:.3g} kWh, {:.3g} g CO2 at {} g/kWh ({})", kwh_of(energy_j_),
            co2_grams_of(energy_j_, config_.monitor.grid_gco2_per_kwh),
            config_.monitor.grid_gco2_per_kwh,
            measured ? "RAPL package counters" : summary_["energy_source"].get<std::string>());
}

// Collective over the world: ends the trace window and has rank 0 write every rank's spans to
// trace.json (Chrome trace format, monitor/trace.h).
void TrainingLoop::write_trace() {
  const nlohmann::json mine = Tracer::instance().stop(rank_);
  std::vector<nlohmann::json> all;
  if (ctx_.group.world) {
    for (const std::string& text : all_gather_strings(*ctx_.group.world, mine.dump())) {
      all.push_back(nlohmann::json::parse(text));  // this job's own ranks
    }
  } else {
    all.push_back(mine);
  }
  if (rank_ != 0) return;
  const std::string path = ctx_.folder.root + "/trace.json";
  write_file_atomic(path, chrome_trace(all).dump() + "\n");
  log_.info(
      "trace of steps {} to {} of every rank in {} (open it in Perfetto or "
      "chrome://tracing)",
      config_.monitor.trace_steps[0], config_.monitor.trace_steps[1], path);
}

// Collective over the world: every rank's peak resident memory, in MiB (world order).
std::vector<double> TrainingLoop::peak_rss_mib_per_rank() {
  const double mine = peak_resident_mib();
  std::vector<double> all(static_cast<size_t>(ctx_.group.size()), mine);
  if (ctx_.group.world) {
    ctx_.group.world->all_gather_bytes(reinterpret_cast<const uint8_t*>(&mine),
                                       reinterpret_cast<uint8_t*>(all.data()), sizeof(double));
  }
  return all;
}

int TrainingLoop::agreed_interrupt() const {
  const int mine = interrupt_signal();
  if (!ctx_.group.world || !straggler_.enabled()) return mine;
  // A rank told by another's sign bit stops as if it had had the launcher's SIGTERM.
  return straggler_.stop_requested_by_any() ? (mine != 0 ? mine : SIGTERM) : 0;
}

int TrainingLoop::stop_on_interrupt(int64_t done, int signo, int64_t last_saved) {
  progress_.interrupt();
  const char* name = signo == SIGINT ? "SIGINT" : "SIGTERM";
  if (ctx_.group.world && !straggler_.enabled()) {
    // Without the per-step exchange the ranks cannot agree on one step to save at.
    finish_checkpoints();
    log_.info(
        "{} after step {}: exiting without a checkpoint (the ranks agree on a step to save "
        "through the straggler exchange, which this run does not do: train.straggler_threshold "
        "= 0 or replicas that step independently); the last checkpoint is {}",
        name, done, last_checkpoint_);
    return 128 + signo;
  }
  log_.info("{} after step {}: saving a checkpoint, then exiting (a second signal exits at once)",
            name, done);
  save_final_checkpoint(done, last_saved);
  log_.info("stopped after step {} of {} by {}; run again to continue", done, config_.train.steps,
            name);
  return 128 + signo;
}

int TrainingLoop::run() {
  const InterruptGuard interrupts;  // SIGINT/SIGTERM: finish the step, save, exit
  start_or_resume();
  if (already_complete_) return 0;
  const TrainConfig& t = config_.train;
  const int64_t stop = config_.run.stop_after;
  const int64_t end = invocation_end(t.steps, start_step_, stop);
  const double tokens_per_step =
      static_cast<double>(engine_.examples_per_step()) * tokens_per_example();
  Stopwatch run_watch;
  int64_t last_saved = start_step_;
  if (rapl_) rapl_->joules_since_last();  // the first step's energy starts here
  comm_ = CommByAxis(engine_.comm_channels());
  const std::vector<int64_t>& trace = config_.monitor.trace_steps;
  // Where steps are handed out (dynamic parameter-server assignment), a worker's steps may
  // repeat or jump: evaluation and checkpoints come when `done` passes a multiple.
  const auto passes = [](int64_t before, int64_t after, int64_t every) {
    return every > 0 && after / every > before / every;
  };
  int64_t prev_done = start_step_;
  for (int64_t step = engine_.next_step(start_step_, end); step < end;
       step = engine_.next_step(step + 1, end)) {
    // The window opens at its first step, or at the first step of a run resumed inside it.
    if (!trace.empty() && step + 1 == std::max(trace[0], start_step_ + 1)) {
      Tracer::instance().start();
    }
    comm_.mark();
    Stopwatch step_watch;
    TraceSpan step_span("step", fmt::format("step {}", step + 1));
    const bool applied = train_step(step);
    const int64_t done = step + 1;
    const double lr = lr_at(schedule_, step);
    nlohmann::json rec = {{"step", done},
                          {"loss", last_.loss},
                          {"lr", lr},
                          {"grad_norm", last_.norm},
                          {"skipped", !applied}};
    const Traffic exchange = straggler_.observe(done, last_.busy_s, interrupt_signal() != 0);
    straggler_.add_step_metrics(rec);
    StepBreakdown& times = last_.times;
    if (straggler_.enabled()) {
      times.attribute_wait(last_.busy_s, straggler_.slowest_busy_s());
      const std::vector<float>& busy = straggler_.busy_s_per_rank();
      for (size_t r = 0; tb_ && r < busy.size(); ++r) {
        tb_->add_scalar(done, fmt::format("rank/busy_ms/{}", r), busy[r] * 1e3);
      }
    }
    engine_.add_step_metrics(rec, applied, updates_, done == t.steps, exchange);
    // This rank's bytes (rank 0: under model parallelism the first stage, tp rank 0).
    comm_.add_since_mark(rec);
    if (passes(prev_done, done, t.eval_every) && done != t.steps) {
      const TraceSpan span("eval", "evaluation");
      Stopwatch eval;
      eval_and_record(done, false);
      times.eval_s = eval.seconds();
    }
    // An asynchronous save that committed since the last step is logged now, not at the next
    // checkpoint.
    if (ckpt_) {
      for (const SaveResult& r : ckpt_->poll()) report_save(r, false);
    }
    bool save = passes(prev_done, done, t.ckpt_every);
    int64_t save_step = done;
    if (engine_.assigns_steps()) {
      // Dynamic assignment: checkpoints are the servers' cuts (sync/ps/ps_server.h), taken at a
      // multiple of ckpt_every once every slice before it is applied; worker 0 saves the last
      // one that its next slice (the loop's next step; end: none left, the drain) has reached.
      const int64_t reached = engine_.next_step(done, end);
      save = reached < end && passes(step, reached, t.ckpt_every);
      save_step = t.ckpt_every > 0 ? reached / t.ckpt_every * t.ckpt_every : done;
    }
    if (save) {
      const TraceSpan span("checkpoint", "checkpoint (blocking part)");
      // The invocation's last step: its save has no next interval to retry it (a failure can
      // come back at once, from save() itself, when the background write fails fast).
      checkpoint(save_step, save_step == end);
      times.checkpoint_s = ckpt_ ? ckpt_->last_blocking_s() : 0.0;
      last_saved = save_step;
    }
    // The step's record closes it: every part of its wall time, evaluation and the blocking
    // part of a checkpoint included, so the parts sum to ms_per_step.
    const double step_s = step_watch.seconds();
    // A handed-out step trains one slice: the job advanced by the steps `done` moved.
    const double step_tokens = engine_.assigns_steps()
                                   ? tokens_per_step * static_cast<double>(done - prev_done)
                                   : tokens_per_step;
    prev_done = done;
    rec["tokens_per_s"] = step_tokens / step_s;
    rec["ms_per_step"] = step_s * 1e3;
    times.add_to(rec, step_s);
    rec["mfu"] = flops_per_step_ / ctx_.group.size() / step_s / peak_flops_;
    add_energy(rec, step_tokens, times.compute_s);
    rec["peak_rss_mib"] = peak_resident_mib();
    record("train", rec);
    const double avg_s =
        run_watch.seconds() / static_cast<double>(std::max<int64_t>(1, done - start_step_));
    log_progress(progress_.update({.step = done,
                                   .total = t.steps,
                                   .loss = last_.loss,
                                   .lr = lr,
                                   .grad_norm = last_.norm,
                                   .tokens_per_s = step_tokens / step_s,
                                   .ms_per_step = step_s * 1e3,
                                   .eta_s = avg_s * static_cast<double>(end - done)}));
    { TraceSpan closed = std::move(step_span); }  // the step's span ends here
    if (!trace.empty() && done == std::min(trace[1], end) && done >= trace[0]) write_trace();
    if (const int signo = agreed_interrupt(); signo != 0 && done < end) {
      return stop_on_interrupt(done, signo, last_saved);
    }
  }
  progress_.interrupt();
  if (end < t.steps) {
    save_final_checkpoint(end, last_saved);
    log_.info("stopped after step {} of {} (run.stop_after = {}); run again to continue", end,
              t.steps, stop);
    return kExitOk;
  }
  eval_and_record(t.steps, true);
  save_final_checkpoint(t.steps, last_saved);
  summary_["final"] = true;
  summary_["skipped_steps"] = skipped_;
  summary_["wall_s"] = run_watch.seconds();
  engine_.add_summary(summary_);
  comm_.add_totals(summary_);
  straggler_.add_summary(summary_);
  summary_["peak_rss_mib_per_rank"] = peak_rss_mib_per_rank();
  if (rank_ == 0) add_energy_summary();
  if (tb_) {
    const auto rss = summary_["peak_rss_mib_per_rank"].get<std::vector<double>>();
    for (size_t r = 0; r < rss.size(); ++r) {
      tb_->add_scalar(t.steps, fmt::format("rank/peak_rss_mib/{}", r), rss[r]);
    }
    summary_["tensorboard_write_failures"] = tb_->failures();
  }
  if (metrics_) summary_["metrics_write_failures"] = metrics_->failures();
  record("summary", summary_);
  if (metrics_ && metrics_->failures() > 0) {
    log_.info("{} metrics records could not be written to {}", metrics_->failures(),
              ctx_.folder.metrics_path());
  }
  log_.info("done: {} steps in {}; summary (exact values in metrics.jsonl):", t.steps - start_step_,
            format_duration(run_watch.seconds()));
  for (const std::string& row : summary_table(summary_)) log_.line(row);
  return kExitOk;
}

}  // namespace

TrainContext::TrainContext(const Config& c, ProcessGroup& g)
    : config(c),
      group(g),
      rank(g.rank()),
      folder(create_run_folder(c, rank)),
      log(rank, folder.rank_log_path(rank), rank == 0),
      data(load_training_data(c, folder, rank)) {}

TrainContext::TrainContext(const Config& c, ProcessGroup& g, RunFolder f, TrainingData d)
    : config(c),
      group(g),
      rank(g.rank()),
      folder(std::move(f)),
      log(rank, "", rank == 0),
      data(std::move(d)) {}

int run_training(TrainContext& ctx, TrainEngine& engine) {
  TrainingLoop loop(ctx, engine);
  return loop.run();
}

}  // namespace brigade
