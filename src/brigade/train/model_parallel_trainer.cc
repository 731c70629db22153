// The model-parallel training loop. The world is the mesh pp x dp x ep x tp (comm/mesh.h, tp
// fastest); this rank holds the v pipeline chunks c = 0..v-1 (global stages c * pp + pp_rank) as
// its tp shard. Per step:
//   1. data: micro-batches 0..m-1 of this dp rank's slice of the global batch (the sampler's
//      dp coordinate and size, so the tp and pp peers of a replica read the same examples);
//   2. forward/backward of the m micro-batches through the schedule (PipelineExecutor), the
//      tp collectives inside each stage; the loss is the mean over the replica's batch;
//   3. the tied wte's two copies summed over the embedding group (tied_embedding.h);
//   4. gradients averaged over the dp axis, chunk by chunk (bucketed all-reduce);
//   5. the global gradient norm: each chunk's tp-aware sum of squares (the tied copy counted
//      once), summed over the pp axis; clipping; the optimizer on each chunk with per-tensor
//      weight decay from the chunk's layout;
//   6. the loss shared from the last stage (sum over pp, mean over dp), metrics, evaluation
//      (forward only, stage by stage) and sharded checkpoints (hybrid_checkpoint.h) on schedule.
// Every rank computes the same decisions (the loss and norm are agreed by collectives), so
// stopping or skipping on a non-finite value happens on all ranks together.
#include "brigade/train/model_parallel_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/comm/mesh.h"
#include "brigade/data/loader.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/metrics.h"
#include "brigade/monitor/progress.h"
#include "brigade/monitor/timer.h"
#include "brigade/parallel/pipeline/executor.h"
#include "brigade/parallel/pipeline/tied_embedding.h"
#include "brigade/parallel/tensor/tp_layout.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/sync/grad_clip.h"
#include "brigade/sync/lr_schedule.h"
#include "brigade/sync/optimizer.h"
#include "brigade/train/hybrid_checkpoint.h"
#include "brigade/train/hybrid_layout.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/training_data.h"

namespace brigade {

namespace {

// Tags of the forward-only evaluation pass, above every training tag (schedule.h uses
// activation_tag / gradient_tag below 2^24 for any realistic m and stage count).
constexpr uint32_t kEvalTagBase = 1u << 30;
// Floats per gradient all-reduce over dp: big enough to amortise, small enough to pipeline.
constexpr int64_t kDpBucketFloats = 1 << 18;

GptConfig gpt_config_of(const Config& c) {
  return GptConfig{.vocab = c.model.vocab,
                   .seq_len = c.model.seq_len,
                   .d_model = c.model.d_model,
                   .n_layer = c.model.n_layer,
                   .n_head = c.model.n_head};
}

// The chunk's layout without the tied copy of wte (the last tensor of a last stage that is not
// also the first), for the global norm, where wte must count once.
ParamLayout norm_layout_of(const GptStage& stage) {
  ParamLayout out;
  for (const ParamSpec& s : stage.layout().specs()) {
    if (stage.holds_tied_copy() && s.name == "wte.weight") continue;
    out.add(s);
  }
  BRIGADE_CHECK(!stage.holds_tied_copy() || out.total() == stage.wte_offset())
      << "wte must be the last tensor of the last stage";
  return out;
}

class ModelParallelTrainer {
 public:
  ModelParallelTrainer(const Config& config, ProcessGroup& group);
  int run();

 private:
  void start_or_resume();
  bool train_step(int64_t step);
  void fill_step_batch(int64_t step);
  void eval_and_record(int64_t step, bool final);
  void checkpoint(int64_t step);
  OpCounters comm_totals();
  void record(const nlohmann::json& rec) {
    if (metrics_) metrics_->write(rec);
  }

  Config config_;
  ProcessGroup& group_;
  int rank_;
  HybridLayout layout_;
  Mesh mesh_;
  Communicator* pp_;
  Communicator* dp_;
  TpContext tp_;
  std::unique_ptr<Communicator> embedding_;
  int pp_rank_, dp_rank_, tp_rank_;
  RunFolder folder_;
  Log log_;
  TrainingData data_;
  DataLoader loader_;
  Batch batch_;
  std::vector<int32_t> tokens_, targets_;  // the replica's m micro-batches, (m B T)
  std::vector<GptStage> chunks_;
  std::vector<GptStage*> chunk_ptrs_;
  std::vector<ParamLayout> norm_layouts_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  std::unique_ptr<PipelineExecutor> executor_;
  std::unique_ptr<HybridCheckpointer> checkpointer_;
  std::unique_ptr<MetricsWriter> metrics_;  // rank 0 only
  Progress progress_;
  LrSchedule schedule_;
  nlohmann::json provenance_, summary_;

  int64_t start_step_ = 0;
  int64_t updates_ = 0;
  int64_t skipped_ = 0;
  std::string last_checkpoint_ = "none";
  double last_loss_ = 0, last_norm_ = 0, last_bubble_ = 0;
};

ModelParallelTrainer::ModelParallelTrainer(const Config& config, ProcessGroup& group)
    : config_(config),
      group_(group),
      rank_(group.rank()),
      layout_(resolve_hybrid_layout(config, group.size())),
      mesh_(layout_.shape, group.world_options),
      pp_((mesh_.init_comms(), &mesh_.comm(MeshAxis::kPP))),
      dp_(&mesh_.comm(MeshAxis::kDP)),
      pp_rank_(mesh_.coord(MeshAxis::kPP)),
      dp_rank_(mesh_.coord(MeshAxis::kDP)),
      tp_rank_(mesh_.coord(MeshAxis::kTP)),
      folder_(create_run_folder(config, rank_)),
      log_(rank_, folder_.rank_log_path(rank_), rank_ == 0),
      data_(load_training_data(config, folder_)),
      loader_(*data_.train, SamplerOptions{.seed = static_cast<uint64_t>(config.run.seed),
                                           .micro_batch = config.train.micro_batch,
                                           .grad_accum = config.train.grad_accum,
                                           .dp_size = layout_.shape.dp,
                                           .dp_rank = dp_rank_}),
      batch_(loader_.make_batch()),
      progress_(config.train.log_every) {
  if (layout_.shape.tp > 1) {
    tp_ = TpContext{.comm = &mesh_.comm(MeshAxis::kTP),
                    .sequence_parallel = layout_.sequence_parallel};
  }
  embedding_ = create_embedding_group(group.world_options, mesh_);
  const GptConfig gpt = gpt_config_of(config);
  const int64_t B = config.train.micro_batch;
  const int m = layout_.micro_batches;
  tokens_.assign(static_cast<size_t>(m * B * gpt.seq_len), 0);
  targets_.assign(tokens_.size(), -1);
  chunks_.reserve(static_cast<size_t>(layout_.virtual_stages));
  for (int c = 0; c < layout_.virtual_stages; ++c) {
    const int stage = c * layout_.shape.pp + pp_rank_;
    chunks_.emplace_back(GptStageConfig{.model = gpt,
                                        .first_layer = layout_.stage_bounds[stage],
                                        .end_layer = layout_.stage_bounds[stage + 1],
                                        .micro_batch = B},
                         tp_);
  }
  const OptimizerConfig opt = optimizer_config(config.train);
  std::vector<PipelineStage*> stages;
  for (GptStage& c : chunks_) {
    chunk_ptrs_.push_back(&c);
    stages.push_back(&c);
    norm_layouts_.push_back(norm_layout_of(c));
    optimizers_.push_back(make_optimizer(opt, c.layout(), 0, c.num_params()));
  }
  executor_ = std::make_unique<PipelineExecutor>(
      *pp_,
      build_schedule(layout_.schedule, {.ranks = layout_.shape.pp,
                                        .micro_batches = m,
                                        .virtual_stages = layout_.virtual_stages}),
      stages);
  std::vector<HybridChunk> parts;
  for (size_t c = 0; c < chunks_.size(); ++c) parts.push_back({&chunks_[c], optimizers_[c].get()});
  checkpointer_ = std::make_unique<HybridCheckpointer>(
      folder_.checkpoints(), *group.world, tp_, std::move(parts),
      static_cast<int>(config.train.keep_checkpoints),
      nlohmann::json{{"pp", layout_.shape.pp}, {"dp", layout_.shape.dp}, {"tp", layout_.shape.tp}});
  if (rank_ == 0) metrics_ = std::make_unique<MetricsWriter>(folder_.metrics_path());
  schedule_ = LrSchedule{.max_lr = static_cast<float>(config.train.lr),
                         .min_lr = static_cast<float>(config.train.min_lr),
                         .warmup = config.train.warmup,
                         .total = config.train.steps};
  schedule_.validate();
}

void ModelParallelTrainer::start_or_resume() {
  log_.info("run folder {}; process {} of {} ({}); hybrid mesh {}; this rank: pp {} dp {} tp {}",
            folder_.root, rank_, group_.size(), group_.env.source, layout_.to_string(), pp_rank_,
            dp_rank_, tp_rank_);
  log_.info("{}", data_.summary);
  int64_t held = 0;
  for (const GptStage& c : chunks_) held += c.num_params();
  log_.info(
      "model gpt: {} parameters on this rank; optimizer {}; {} steps x {} micro-batches x "
      "{} replicas x {} examples of {} tokens",
      held, config_.train.optimizer, config_.train.steps, layout_.micro_batches, layout_.shape.dp,
      config_.train.micro_batch, config_.model.seq_len);
  // Initialisation is per tensor name and element, so every rank's shard starts from the
  // single-process model's values and the two wte copies agree without communication.
  for (GptStage& c : chunks_) c.initialize(static_cast<uint64_t>(config_.run.seed));
  if (config_.run.resume == "auto") {
    std::string dir;
    if (auto state = checkpointer_->restore(&dir)) {
      if (!state->contains("hybrid")) {
        throw CheckpointError(fmt::format("{} was not written by a model-parallel run", dir));
      }
      start_step_ = loader_.sampler().resume_step(state->at("sampler").get<SamplerState>());
      updates_ = state->at("updates").get<int64_t>();
      last_checkpoint_ = dir;
      log_.info("resumed from {} at step {} (saved by {})", dir, start_step_,
                state->at("hybrid").dump());
    }
  }
  if (rank_ == 0) {
    provenance_ = provenance(config_, data_.source_files);
    provenance_["world_size"] = group_.size();
    provenance_["launcher"] = group_.env.source;
    provenance_["mesh"] = layout_.to_string();
    write_run_manifest(folder_, provenance_);
  }
}

void ModelParallelTrainer::fill_step_batch(int64_t step) {
  const int64_t n = config_.train.micro_batch * config_.model.seq_len;
  for (int j = 0; j < layout_.micro_batches; ++j) {
    loader_.next(batch_, step, j);
    std::copy_n(batch_.tokens.begin(), n, tokens_.begin() + j * n);
    std::copy_n(batch_.targets.begin(), n, targets_.begin() + j * n);
  }
  for (GptStage& c : chunks_) c.set_batch(tokens_.data(), targets_.data(), layout_.micro_batches);
}

bool ModelParallelTrainer::train_step(int64_t step) {
  fill_step_batch(step);
  for (GptStage& c : chunks_) c.zero_grads();
  const StepStats stats = executor_->run_step();
  last_bubble_ = stats.bubble();
  sum_tied_embedding_grads(embedding_.get(), chunk_ptrs_);
  if (layout_.shape.dp > 1) {
    for (GptStage& c : chunks_) {
      for (int64_t at = 0; at < c.num_params(); at += kDpBucketFloats) {
        dp_->all_reduce(c.grads() + at, std::min(kDpBucketFloats, c.num_params() - at),
                        ReduceOp::kAvg);
      }
    }
  }
  // [loss on the last stage, sum of squares]: summed over pp (one all-reduce), then the loss
  // averaged over dp (the squares are equal across dp after the average above).
  double squares = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    squares += sum_of_squares_full(tp_, norm_layouts_[c], chunks_[c].grads());
  }
  const bool last = pp_rank_ == layout_.shape.pp - 1;
  float v[2] = {last ? stats.loss : 0.0f, static_cast<float>(squares)};
  pp_->all_reduce(v, 2, ReduceOp::kSum);
  dp_->all_reduce(v, 1, ReduceOp::kAvg);
  const double loss = v[0];
  const double norm = std::sqrt(static_cast<double>(v[1]));
  last_loss_ = loss;
  last_norm_ = norm;
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    std::string what =
        fmt::format("non-finite {} ({}) at step {}", std::isfinite(loss) ? "gradient norm" : "loss",
                    std::isfinite(loss) ? norm : loss, step + 1);
    progress_.interrupt();
    if (config_.train.on_nonfinite == "stop") {
      throw NonFiniteError(
          fmt::format("{}; stopping. The last good checkpoint is {}", what, last_checkpoint_));
    }
    log_.info("{}; skipping this update (train.on_nonfinite = \"skip\")", what);
    ++skipped_;
    return false;
  }
  if (config_.train.grad_clip > 0) {
    const float scale = clip_scale(norm, static_cast<float>(config_.train.grad_clip));
    if (scale < 1.0f) {
      for (GptStage& c : chunks_) {
        float* g = c.grads();
        for (int64_t i = 0; i < c.num_params(); ++i) g[i] *= scale;
      }
    }
  }
  ++updates_;
  const float lr = lr_at(schedule_, step);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    optimizers_[c]->step(chunks_[c].params(), chunks_[c].grads(), 0, chunks_[c].num_params(), lr,
                         updates_);
  }
  return true;
}

// Forward only, stage by stage: global stage g runs on pipeline rank g % pp (chunk g / pp),
// receiving its input from the rank of stage g - 1. Validation batch k goes to replica
// k % dp; a partial last batch is padded with ignored targets and weighted by its examples.
void ModelParallelTrainer::eval_and_record(int64_t step, bool final) {
  const int64_t B = config_.train.micro_batch, T = config_.model.seq_len;
  const int pp = layout_.shape.pp;
  const int stages = pp * layout_.virtual_stages;
  EvalIterator it(*data_.val, B, config_.train.eval_batches);
  Batch batch = it.make_batch();
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  std::vector<float> in, out, saved;
  double sums[2] = {0, 0};  // loss sum, examples
  for (int64_t k = dp_rank_; k < it.num_batches(); k += layout_.shape.dp) {
    it.fill(batch, k);
    const int64_t n = batch.size * T;
    std::fill(tokens.begin(), tokens.end(), 0);
    std::fill(targets.begin(), targets.end(), -1);
    std::copy_n(batch.tokens.begin(), n, tokens.begin());
    std::copy_n(batch.targets.begin(), n, targets.begin());
    for (int g = 0; g < stages; ++g) {
      if (g % pp != pp_rank_) continue;
      GptStage& c = chunks_[static_cast<size_t>(g / pp)];
      c.set_batch(tokens.data(), targets.data(), 1);
      in.resize(static_cast<size_t>(c.input_floats()));
      out.resize(static_cast<size_t>(c.output_floats()));
      saved.resize(static_cast<size_t>(c.saved_floats()));
      if (g > 0) {
        pp_->recv_async(in.data(), c.input_floats() * 4, (g - 1) % pp, kEvalTagBase + g)->wait();
      }
      const float loss = c.forward(0, in.data(), out.data(), saved.data());
      if (g + 1 < stages) {
        pp_->send_async(out.data(), c.output_floats() * 4, (g + 1) % pp, kEvalTagBase + g + 1)
            ->wait();
      } else if (tp_rank_ == 0) {
        sums[0] += static_cast<double>(loss) * static_cast<double>(batch.size);
        sums[1] += static_cast<double>(batch.size);
      }
    }
  }
  float v[2] = {static_cast<float>(sums[0]), static_cast<float>(sums[1])};
  group_.world->all_reduce(v, 2, ReduceOp::kSum);
  const double val_loss = v[1] > 0 ? v[0] / v[1] : 0.0;
  nlohmann::json rec = {{"step", step}, {"val_loss", val_loss}, {"val_examples", v[1]}};
  std::string line = fmt::format("step {}: validation loss {:.4f}", step, val_loss);
  if (data_.tokenizer) {
    const double bpb = val_loss / std::log(2.0) / data_.val_bytes_per_token;
    rec["val_bits_per_byte"] = bpb;
    line += fmt::format(" = {:.3f} bits/byte (unigram baseline {:.3f})", bpb,
                        data_.unigram_bits_per_byte);
    if (final) summary_["unigram_bits_per_byte"] = data_.unigram_bits_per_byte;
  }
  if (final) summary_.update(rec);
  record(rec);
  progress_.interrupt();
  if (rank_ == 0) log_.line(line);
}

void ModelParallelTrainer::checkpoint(int64_t step) {
  Stopwatch watch;
  const nlohmann::json state = {{"step", step},
                                {"updates", updates_},
                                {"sampler", loader_.sampler().state(step)},
                                {"hybrid",
                                 {{"pp", layout_.shape.pp},
                                  {"dp", layout_.shape.dp},
                                  {"tp", layout_.shape.tp},
                                  {"schedule", config_.parallel.schedule},
                                  {"v", layout_.virtual_stages}}},
                                {"config", config_.to_toml()},
                                {"provenance", provenance_}};
  const SaveResult r = checkpointer_->save(step, state);
  if (!r.ok) throw CheckpointError(fmt::format("checkpoint of step {} failed: {}", step, r.error));
  last_checkpoint_ = r.dir;
  if (rank_ != 0) return;
  progress_.interrupt();
  log_.info("checkpoint {} ({:.0f} ms, sharded over {} ranks)", r.dir, watch.millis(),
            group_.size());
}

OpCounters ModelParallelTrainer::comm_totals() {
  OpCounters sum;
  auto add = [&](const Communicator& c) {
    const OpCounters t = c.stats().total();
    sum.calls += t.calls;
    sum.bytes_sent += t.bytes_sent;
    sum.bytes_received += t.bytes_received;
    sum.rounds += t.rounds;
  };
  add(*group_.world);
  for (MeshAxis a : kMeshAxes) add(mesh_.comm(a));
  if (embedding_) add(*embedding_);
  return sum;
}

int ModelParallelTrainer::run() {
  start_or_resume();
  const TrainConfig& t = config_.train;
  const int64_t stop = config_.run.stop_after;
  const int64_t end = stop > 0 ? std::min(t.steps, start_step_ + stop) : t.steps;
  const double tokens_per_step = static_cast<double>(t.micro_batch * layout_.micro_batches *
                                                     layout_.shape.dp * config_.model.seq_len);
  Stopwatch run_watch;
  int64_t last_saved = start_step_;
  for (int64_t step = start_step_; step < end; ++step) {
    const OpCounters before = comm_totals();
    Stopwatch step_watch;
    const bool applied = train_step(step);
    const int64_t done = step + 1;
    const double ms = step_watch.millis();
    const double lr = lr_at(schedule_, step);
    const OpCounters after = comm_totals();
    // Bytes are this rank's (rank 0: first pipeline stage, tp rank 0).
    record({{"step", done},
            {"loss", last_loss_},
            {"lr", lr},
            {"grad_norm", last_norm_},
            {"tokens_per_s", tokens_per_step / (ms / 1e3)},
            {"ms_per_step", ms},
            {"skipped", !applied},
            {"pipeline_bubble", last_bubble_},
            {"comm_sent_bytes", after.bytes_sent - before.bytes_sent},
            {"comm_recv_bytes", after.bytes_received - before.bytes_received},
            {"comm_rounds", after.rounds - before.rounds}});
    const double avg_s = run_watch.seconds() / static_cast<double>(done - start_step_);
    if (rank_ == 0) {
      const std::string line = progress_.update({.step = done,
                                                 .total = t.steps,
                                                 .loss = last_loss_,
                                                 .lr = lr,
                                                 .grad_norm = last_norm_,
                                                 .tokens_per_s = tokens_per_step / (ms / 1e3),
                                                 .ms_per_step = ms,
                                                 .eta_s = avg_s * static_cast<double>(end - done)});
      if (!line.empty()) progress_.on_terminal() ? log_.file_only(line) : log_.line(line);
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
    log_.info("stopped after step {} of {} (run.stop_after = {}); run again to continue", end,
              t.steps, stop);
    return kExitOk;
  }
  eval_and_record(t.steps, true);
  if (last_saved != t.steps) checkpoint(t.steps);
  const OpCounters total = comm_totals();
  summary_["final"] = true;
  summary_["skipped_steps"] = skipped_;
  summary_["wall_s"] = run_watch.seconds();
  summary_["mesh"] = layout_.to_string();
  summary_["comm_sent_bytes"] = total.bytes_sent;
  summary_["comm_recv_bytes"] = total.bytes_received;
  summary_["comm_rounds"] = total.rounds;
  record(summary_);
  log_.info("done: {} steps in {}; summary {}", t.steps - start_step_,
            format_duration(run_watch.seconds()), summary_.dump());
  return kExitOk;
}

}  // namespace

int train_model_parallel(const Config& config, ProcessGroup& group) {
  if (!group.world) {
    throw ConfigError(fmt::format(
        "parallel.tp = {}, parallel.pp = {} need tp x pp processes; this is one process (start it "
        "with brigade launch --nproc N)",
        config.parallel.tp, config.parallel.pp));
  }
  ModelParallelTrainer trainer(config, group);
  return trainer.run();
}

}  // namespace brigade
