// The model-parallel step. The world is the mesh pp x dp x ep x tp (comm/mesh.h, tp fastest);
// this rank holds the v pipeline chunks c = 0..v-1 (global stages c * pp + pp_rank) as its tp
// shard, and of every mixture-of-experts block only the experts of its ep coordinate. The data
// replicas are the dp x ep ranks of one (pp, tp) position ("ep is carved out of dp"): replica
// q = dp_rank * ep + ep_rank. Per step:
//   1. data: micro-batches 0..m-1 of replica q's slice of the global batch (the sampler's
//      replica index and count, so the tp and pp peers of a replica read the same examples);
//   2. forward/backward of the m micro-batches through the schedule (PipelineExecutor), the
//      tp collectives inside each stage and the ep all-to-alls inside each MoE block; a stage's
//      loss is its part of the mean over the replica's batch (the cross-entropy on the last,
//      each MoE block's aux term where the block is);
//   3. gradients averaged chunk by chunk (bucketed all-reduces of parallel.bucket_mb): expert
//      tensors over dp (the ranks holding the same experts), everything else over dp x ep;
//      each bucket starts as soon as the stage's last backward of the step has finished it
//      (DataParallel, parallel/ddp.h), so it overlaps the rest of the pipeline's backward
//      (parallel.overlap_grad_reduce = false: all after the schedule, stage_grad_sync.h);
//   4. the tied wte's two copies summed over the embedding group (tied_embedding.h);
//   5. the global gradient norm: each chunk's tp-aware sum of squares (the tied copy counted
//      once, expert squares summed over ep), summed over the pp axis; the loss summed over pp
//      and averaged over the replicas. Clipping and the optimizer on each chunk (per-tensor
//      weight decay from the chunk's layout) follow when the loop decides to apply the update.
//      With parallel.zero = 1 (ep = 1) each dp rank steps, and keeps optimizer state for, only
//      its own whole tensors of the chunk, then the chunk is all-gathered over dp
//      (dp_shard_update.h). With parallel.zero = 2 step 3 is a reduce-scatter over dp instead
//      (each rank receives its own tensors' average) and step 5 sums the ranks' squares over dp.
// With a low-communication sync.method (DiLoCo, streaming DiLoCo, DeMo, PowerSGD, sign/top-k
// with error feedback) step 3 does not run: each chunk has a ReplicaSync (sync/replica_sync.h)
// over the replicas of its (pp, tp) position, which steps the chunk's tensors but the tied wte
// copy and exchanges with the other replicas as the method says; the tied copy then takes the
// first stage's wte (tied_embedding.h), and step 5 averages the replicas' squared norms, as
// the data-parallel engine does. A tp shard is synced as it lies: the elementwise methods
// (DiLoCo with f32 or int8 pseudo-gradients, sign/top-k by value) do what they do unsharded;
// the ones that compress a matrix (PowerSGD, DeMo's DCT chunks) compress each shard on its own.
// Evaluation runs forward only, stage by stage. Checkpoints are the loop's sharded ones: each
// tp shard is a region of the full GPT-2-named tensor (tp_state_pieces.h), so nothing is
// gathered and a checkpoint loads under any other tp x pp x dp layout.
#include "brigade/train/model_parallel_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/comm/mesh.h"
#include "brigade/data/micro_batch_weights.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/model/moe/moe_metrics.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/monitor/timer.h"
#include "brigade/optim/optimizer.h"
#include "brigade/optim/trainable_mask.h"
#include "brigade/parallel/ddp.h"
#include "brigade/parallel/dp_shard_update.h"
#include "brigade/parallel/expert/stage_grad_sync.h"
#include "brigade/parallel/pipeline/executor.h"
#include "brigade/parallel/pipeline/tied_embedding.h"
#include "brigade/parallel/tp_state_pieces.h"
#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/replica_sync.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/sync_strategy.h"

namespace brigade {

namespace {

// Tags of the forward-only evaluation pass, above every training tag (schedule.h uses
// activation_tag / gradient_tag below 2^24 for any realistic m and stage count).
constexpr uint32_t kEvalTagBase = 1u << 30;

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

class ModelParallelEngine final : public TrainEngine {
 public:
  ModelParallelEngine(TrainContext& ctx, HybridLayout layout);

  void log_layout() override {
    ctx_.log.info(
        "run folder {}; process {} of {} ({}); hybrid mesh {}; this rank: pp {} dp {} ep {} tp {}",
        ctx_.folder.root, ctx_.rank, ctx_.group.size(), ctx_.group.env.source, layout_.to_string(),
        pp_rank_, dp_rank_, ep_rank_, tp_rank_);
    ctx_.log.info("replicas sync by {}{}", describe_sync(config_.sync, config_.parallel),
                  config_.sync.method != SyncKind::kDdp && replica_syncs_.empty()
                      ? " (ignored: one replica has no other to sync with; plain local training)"
                  : replica_syncs_.empty() ? ""
                                           : ", each pipeline chunk's shard over its dp group");
  }
  void log_model() override {
    int64_t held = 0;
    for (const GptStage& c : chunks_) held += c.num_params();
    ctx_.log.info(
        "model gpt: {} parameters on this rank; optimizer {}; {} steps x {} micro-batches x "
        "{} replicas x {} examples of {} tokens",
        held, config_.train.optimizer, config_.train.steps, layout_.micro_batches, replicas_,
        config_.train.micro_batch, config_.model.seq_len);
    if (!freeze_patterns(config_).empty()) ctx_.log.info("{}", describe_freeze(freeze_));
    ctx_.log.info("optimizer state: {} floats on this rank{}", state_floats(),
                  zero_ > 0 ? fmt::format(" (ZeRO-{} over dp = {}: its own tensors of each chunk)",
                                          zero_, layout_.shape.dp)
                  : config_.parallel.zero > 0
                      ? " (parallel.zero ignored: dp = 1 has nothing to shard)"
                      : "");
  }
  // Initialisation is per tensor name and element, so every rank's shard starts from the
  // single-process model's values and the two wte copies agree without communication.
  void initialize(uint64_t seed) override {
    for (GptStage& c : chunks_) c.initialize(seed);
  }
  int64_t examples_per_step() const override {
    return config_.train.micro_batch * layout_.micro_batches * replicas_;
  }
  DataLoader& loader() override { return loader_; }

  StepGradients compute_gradients(int64_t step) override;
  void scale_grads(float scale) override;
  void apply_update(float lr, int64_t updates) override;
  void add_step_metrics(nlohmann::json& rec, bool, int64_t, bool, const Traffic&) override;

  EvalSums evaluate() override;

  std::vector<StatePiece> checkpoint_pieces() override;
  nlohmann::json checkpoint_mesh() const override {
    return {{"pp", layout_.shape.pp},
            {"dp", layout_.shape.dp},
            {"ep", layout_.shape.ep},
            {"tp", layout_.shape.tp}};
  }
  nlohmann::json checkpoint_extra() const override {
    return {{"sync", sync_record(config_, sync_replicas())},
            {"hybrid",
             {{"pp", layout_.shape.pp},
              {"dp", layout_.shape.dp},
              {"ep", layout_.shape.ep},
              {"tp", layout_.shape.tp},
              {"schedule", config_.parallel.schedule},
              {"v", layout_.virtual_stages}}}};
  }
  // Every layout saves the same per-tensor state (docs/checkpoints.md), so any layout's
  // checkpoint continues here, but for a low-communication method's per-replica state.
  void check_resume(const SavedState& saved, const std::string& dir) const override {
    check_sync_record(saved.extra, config_, sync_replicas(), dir);
  }
  ParamLayout checkpoint_layout() const override { return whole_layout_; }
  void after_restore(bool resumed) override;
  bool replicas_wait_each_step() const override {
    return replica_syncs_.empty() || !replica_syncs_.front()->method().independent_steps();
  }

  void add_provenance(nlohmann::json& p) const override { p["mesh"] = layout_.to_string(); }
  std::vector<CommChannel> comm_channels() override;
  void add_summary(nlohmann::json& summary) override;

 private:
  void fill_step_batch(int64_t step);
  // This step's (or, run = true, this invocation's) routing totals of every MoE block of the
  // pipeline: the chunks' totals merged, then summed over pp (max for the peak imbalance).
  MoeTotals pipeline_moe_totals(bool run);
  int64_t state_floats();
  void average_own_dense_over_ep(size_t chunk);
  // The replicas the sync method counts: dp x ep for DDP (every one reads its own data); the dp
  // coordinates for a low-communication method (a replica is its ep, tp and pp groups).
  // (JobPlan::sync_replicas, which the launcher checked resumes against.)
  int sync_replicas() const {
    return is_low_communication(config_.sync.method) ? layout_.shape.dp : replicas_;
  }
  // The whole model's tp = 1 layout (checkpoint names; streaming DiLoCo's fragments).
  static ParamLayout whole_layout(const Config& config);

  int zero_;  // the ZeRO stage on dp: parallel.zero (1 or 2) when dp > 1, else 0

  TrainContext& ctx_;
  const Config& config_;
  HybridLayout layout_;
  ParamLayout whole_layout_;
  Mesh mesh_;
  Communicator* pp_;
  Communicator* dp_;
  Communicator* ep_;             // null when ep = 1
  Communicator* replicas_comm_;  // dp x ep: the data replicas (comm(kDP) when ep = 1)
  TpContext tp_;
  std::unique_ptr<Communicator> embedding_;
  int pp_rank_, dp_rank_, ep_rank_, tp_rank_;
  int replica_, replicas_;  // this rank's replica index dp_rank * ep + ep_rank, and dp * ep
  bool has_moe_;
  DataLoader loader_;
  Batch batch_;
  std::vector<int32_t> tokens_, targets_;  // the replica's m micro-batches, (m B T)
  std::vector<float> micro_weights_;       // (m) this step's micro-batch weights, if masked
  std::vector<GptStage> chunks_;
  std::vector<GptStage*> chunk_ptrs_;
  FreezeSummary freeze_;               // train.freeze over the whole model (tp = 1 layout)
  std::vector<TrainableMask> frozen_;  // train.freeze over each chunk's layout
  std::vector<ParamLayout> norm_layouts_;
  std::vector<ParamLayout> owned_norm_layouts_;          // ZeRO-2: each norm layout's owned tensors
  std::vector<std::unique_ptr<DpShardUpdate>> updates_;  // per chunk, when replicas all-reduce
  std::vector<std::unique_ptr<ReplicaSync>> replica_syncs_;  // per chunk, low-communication sync
  // Per chunk, the dp average of DDP and ZeRO-1 (overlapping backward unless
  // parallel.overlap_grad_reduce = false); empty for ZeRO-2, replica sync and one replica.
  std::vector<std::unique_ptr<DataParallel>> averages_;
  double exposed_comm_s_ = 0;  // this step's wait for the dp gradient average
  Traffic formula_total_;      // replica sync: dp bytes by formula over this invocation's steps
  std::unique_ptr<PipelineExecutor> executor_;
  double last_bubble_ = 0;
  int64_t last_pool_bytes_ = 0;  // the executor's activation and message buffers at their peak
};

ModelParallelEngine::ModelParallelEngine(TrainContext& ctx, HybridLayout layout)
    : zero_(layout.shape.dp > 1 ? static_cast<int>(ctx.config.parallel.zero) : 0),
      ctx_(ctx),
      config_(ctx.config),
      layout_(std::move(layout)),
      whole_layout_(whole_layout(ctx.config)),
      mesh_(layout_.shape, ctx.group.world_options),
      pp_((mesh_.init_comms(), &mesh_.comm(MeshAxis::kPP))),
      dp_(&mesh_.comm(MeshAxis::kDP)),
      ep_(layout_.shape.ep > 1 ? &mesh_.comm(MeshAxis::kEP) : nullptr),
      replicas_comm_(&mesh_.replica_comm()),
      pp_rank_(mesh_.coord(MeshAxis::kPP)),
      dp_rank_(mesh_.coord(MeshAxis::kDP)),
      ep_rank_(mesh_.coord(MeshAxis::kEP)),
      tp_rank_(mesh_.coord(MeshAxis::kTP)),
      replica_(dp_rank_ * layout_.shape.ep + ep_rank_),
      replicas_(layout_.shape.dp * layout_.shape.ep),
      has_moe_(config_.model.n_experts > 0),
      loader_(*ctx.data.train, SamplerOptions{.seed = static_cast<uint64_t>(config_.run.seed),
                                              .micro_batch = config_.train.micro_batch,
                                              .grad_accum = config_.train.grad_accum,
                                              .dp_size = replicas_,
                                              .dp_rank = replica_}),
      batch_(loader_.make_batch()) {
  if (layout_.shape.tp > 1) {
    tp_ = TpContext{.comm = &mesh_.comm(MeshAxis::kTP),
                    .sequence_parallel = layout_.sequence_parallel};
  }
  // Against the whole model (a chunk holds only its stage's tensors); every rank alike.
  freeze_ = check_freeze_patterns(checkpoint_layout(), freeze_patterns(config_));
  embedding_ = create_embedding_group(ctx.group.world_options, mesh_);
  GptConfig gpt = gpt_config(config_.model);
  gpt.recompute_blocks = config_.train.recompute == RecomputeMode::kBlock;
  const int64_t B = config_.train.micro_batch;
  const int m = layout_.micro_batches;
  tokens_.assign(static_cast<size_t>(m * B * gpt.seq_len), 0);
  micro_weights_.assign(static_cast<size_t>(m), 0.0f);
  targets_.assign(tokens_.size(), -1);
  chunks_.reserve(static_cast<size_t>(layout_.virtual_stages));
  for (int c = 0; c < layout_.virtual_stages; ++c) {
    const int stage = c * layout_.shape.pp + pp_rank_;
    chunks_.emplace_back(GptStageConfig{.model = gpt,
                                        .first_layer = layout_.stage_bounds[stage],
                                        .end_layer = layout_.stage_bounds[stage + 1],
                                        .micro_batch = B,
                                        // W would read what recomputation does not keep
                                        // (LoRA adapters split too: dA, dB in W).
                                        .split_backward = !gpt.recompute_blocks},
                         tp_, ep_);
  }
  const OptimizerConfig opt = optimizer_config(config_);
  std::vector<PipelineStage*> stages;
  // dp_'s ranks hold the same tensors (dense and experts), so ZeRO shards over it whatever ep;
  // under ZeRO-2 the dense part of each rank's range is then averaged over ep too.
  BRIGADE_CHECK(zero_ <= 2) << "ZeRO-" << zero_;
  // A low-communication method's replicas are the dp coordinates: with ep > 1 a replica is its
  // ep group (which routes tokens to each other's experts every step), as it is its tp and pp
  // groups.
  const bool replica_sync = config_.sync.method != SyncKind::kDdp && layout_.shape.dp > 1;
  const WireDtype wire = gradient_wire(config_);
  norm_layouts_.reserve(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) {
    GptStage& c = chunks_[i];
    chunk_ptrs_.push_back(&c);
    stages.push_back(&c);
    norm_layouts_.push_back(norm_layout_of(c));
    frozen_.emplace_back(c.layout(), freeze_patterns(config_));
    if (replica_sync) {
      // The tied wte copy is left out (it follows the first stage's); norm_layouts_ is reserved,
      // so the layout's address holds.
      const int stage = static_cast<int>(i) * layout_.shape.pp + pp_rank_;
      replica_syncs_.push_back(make_replica_sync(
          config_, *dp_,
          SyncedParams{.layout = &norm_layouts_.back(),
                       .params = c.params(),
                       .grads = c.grads(),
                       .whole = &whole_layout_,
                       .scope = fmt::format("stage{}.ep{}.tp{}.", stage, ep_rank_, tp_rank_)},
          ctx.group.world_options.store, [this](const std::string& line) { ctx_.log.line(line); }));
      // Inside a replica of ep ranks the dense tensors are one model, averaged over ep every
      // step like DDP; each rank's experts are its own (the method syncs them over dp, with the
      // ranks holding the same experts).
      if (ep_ != nullptr) {
        averages_.push_back(std::make_unique<DataParallel>(
            *ep_, c,
            DdpOptions{.bucket_elems = gradient_bucket_floats(config_.parallel),
                       .wire = wire,
                       .overlap = config_.parallel.overlap_grad_reduce,
                       .group = c.expert_ranges()}));
      }
      continue;
    }
    updates_.push_back(
        std::make_unique<DpShardUpdate>(opt, c.layout(), zero_ > 0 ? dp_ : nullptr, zero_ == 2));
    if (replicas_ > 1 && zero_ < 2) {
      // Expert tensors average over dp (the ranks holding the same experts), the rest over
      // the replicas (dp x ep).
      averages_.push_back(std::make_unique<DataParallel>(
          *replicas_comm_, c,
          DdpOptions{.bucket_elems = gradient_bucket_floats(config_.parallel),
                     .wire = wire,
                     .overlap = config_.parallel.overlap_grad_reduce,
                     .group = c.expert_ranges(),
                     .group_comm = dp_}));
    }
    if (zero_ == 2)
      owned_norm_layouts_.push_back(updates_.back()->owned_part(norm_layouts_.back()));
  }
  executor_ = std::make_unique<PipelineExecutor>(
      *pp_,
      build_schedule(layout_.schedule, {.ranks = layout_.shape.pp,
                                        .micro_batches = m,
                                        .virtual_stages = layout_.virtual_stages}),
      stages);
}

void ModelParallelEngine::fill_step_batch(int64_t step) {
  const int64_t n = config_.train.micro_batch * config_.model.seq_len;
  for (int j = 0; j < layout_.micro_batches; ++j) {
    loader_.next(batch_, step, j);
    std::copy_n(batch_.tokens.begin(), n, tokens_.begin() + j * n);
    std::copy_n(batch_.targets.begin(), n, targets_.begin() + j * n);
  }
  for (GptStage& c : chunks_) c.set_batch(tokens_.data(), targets_.data(), layout_.micro_batches);
}

StepGradients ModelParallelEngine::compute_gradients(int64_t step) {
  StepBreakdown times;
  Stopwatch data;
  fill_step_batch(step);
  times.data_s = data.seconds();
  for (GptStage& c : chunks_) c.zero_grads();
  // Masked targets (instruction data): a stage normalises by its replica's own valid targets, so
  // weight the replica by its share of the global batch's before the averages over replicas
  // (data/micro_batch_weights.h); ep = 1 here (config validation), so every gradient of this
  // rank comes from this replica's examples alone.
  float replica_weight = 1.0f;
  if (ctx_.data.train->masks_targets()) {
    masked_micro_batch_weights(*ctx_.data.train, loader_.sampler(), step, true,
                               micro_weights_.data());
    replica_weight = 0.0f;
    for (float w : micro_weights_) replica_weight += w;
  }
  // Overlapped averages scale each bucket by the weight right before its all-reduce.
  for (auto& average : averages_) average->arm(replica_weight);
  const StepStats stats = executor_->run_step();
  if (averages_.empty() && replica_weight != 1.0f) scale_grads(replica_weight);
  last_bubble_ = stats.bubble();
  last_pool_bytes_ = stats.peak_bytes;
  times.compute_s = stats.busy_s;
  times.bubble_s = stats.idle_s();
  Stopwatch comm;  // the dp averages' wait, the tied-embedding sum and the scalar all-reduces
  // What the overlapped averages did not hide (ZeRO-2: its reduce-scatter, after backward).
  // Low-communication methods keep each replica's gradient on its replica.
  exposed_comm_s_ = 0;
  for (auto& average : averages_) exposed_comm_s_ += average->finish();
  // The tied copies' sum and the dp average are both sums, so either order gives the result up
  // to rounding: after the overlapped averages (which read the stage's own gradient as backward
  // left it), before ZeRO-2's reduce-scatter (after which a rank holds only its own tensors).
  sum_tied_embedding_grads(embedding_.get(), chunk_ptrs_);
  if (zero_ == 2) {
    Stopwatch reduce_scatter;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      updates_[c]->reduce_scatter_grads(chunks_[c].grads());
      average_own_dense_over_ep(c);
    }
    exposed_comm_s_ = reduce_scatter.seconds();
  }
  // Frozen tensors (train.freeze; both wte copies alike) take no part in the norm or the update.
  for (size_t c = 0; c < chunks_.size(); ++c) {
    frozen_[c].zero_frozen(chunks_[c].grads(), 0, chunks_[c].num_params());
  }
  // [stage losses, sum of squares]: summed over pp (one all-reduce), then the loss averaged
  // over the replicas (the squares are equal across them after the averages above). A stage's
  // loss is its part of the replica's mean loss: the cross-entropy on the last stage, the MoE
  // aux terms where MoE blocks are, 0 elsewhere. Under ZeRO-2 a rank holds the average of its
  // own tensors only: squares over those (tp-aware, experts summed over ep), summed over dp.
  double squares = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    squares += zero_ == 2 ? stage_grad_squares(chunks_[c], owned_norm_layouts_[c], tp_, ep_,
                                               updates_[c]->begin())
                          : stage_grad_squares(chunks_[c], norm_layouts_[c], tp_, ep_);
  }
  float v[2] = {stats.loss * replica_weight, static_cast<float>(squares)};
  pp_->all_reduce(v, 2, ReduceOp::kSum);
  if (zero_ == 2) dp_->all_reduce(v + 1, 1, ReduceOp::kSum);
  if (replica_syncs_.empty()) {
    replicas_comm_->all_reduce(v, 1, ReduceOp::kAvg);
  } else if (replicas_wait_each_step()) {
    // Each replica's own squared norm: their mean, with the loss in the same all-reduce (as
    // ReplicaSync::reduce_step_scalars under data parallelism).
    replicas_comm_->all_reduce(v, 2, ReduceOp::kAvg);
  }
  times.comm_s = comm.seconds();
  // busy_s: the executor's time inside this rank's stage forwards and backwards.
  return {.loss = v[0],
          .norm = std::sqrt(static_cast<double>(v[1])),
          .busy_s = stats.busy_s,
          .times = times};
}

// ZeRO-2 with ep > 1: the reduce-scatter averaged this rank's range over dp; its dense tensors
// have dp x ep replicas, so their part is averaged over ep as well (the ep peers own the same
// range: the split depends on tensor sizes, which experts share). Experts are averaged over dp
// alone, their replicas.
void ModelParallelEngine::average_own_dense_over_ep(size_t c) {
  if (ep_ == nullptr) return;
  const int64_t begin = updates_[c]->begin(), end = updates_[c]->end();
  for (const ParamGroup& r : chunks_[c].dense_ranges()) {
    const int64_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo < hi) ep_->all_reduce(chunks_[c].grads() + lo, hi - lo, ReduceOp::kAvg);
  }
}

void ModelParallelEngine::scale_grads(float scale) {
  for (GptStage& c : chunks_) {
    float* g = c.grads();
    for (int64_t i = 0; i < c.num_params(); ++i) g[i] *= scale;
  }
}

void ModelParallelEngine::apply_update(float lr, int64_t updates) {
  if (!replica_syncs_.empty()) {
    for (auto& sync : replica_syncs_) sync->step(lr, updates);
    sync_tied_embedding_params(embedding_.get(), chunk_ptrs_);
    return;
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    updates_[c]->step(chunks_[c].params(), chunks_[c].grads(), lr, updates);
  }
}

// Fresh (or init_from) starts: every rank initialised alike; a method may take its starting
// point (DiLoCo's theta_global). The tied copy is not among a replica sync's pieces: it takes
// the first stage's wte either way.
void ModelParallelEngine::after_restore(bool resumed) {
  if (replica_syncs_.empty()) return;
  for (auto& sync : replica_syncs_) sync->after_restore(resumed);
  sync_tied_embedding_params(embedding_.get(), chunk_ptrs_);
}

ParamLayout ModelParallelEngine::whole_layout(const Config& config) {
  ParamLayout full;
  std::vector<ParamGroup> groups;
  const GptConfig gpt = gpt_config(config.model);
  build_gpt_layout(gpt, make_gpt_shard(gpt, 1, 0), full, groups);
  return full;
}

// Forward only, stage by stage: global stage g runs on pipeline rank g % pp (chunk g / pp),
// receiving its input from the rank of stage g - 1. Validation batch k goes to replica
// k % replicas; a partial last batch is padded with ignored targets and weighted by its
// examples. MoE forwards are collective over ep, so every replica runs the same number of
// rounds: one whose batch index is past the end repeats the last batch with weight 0. The
// reported loss is the task loss (the last stage's MoE aux term taken out).
EvalSums ModelParallelEngine::evaluate() {
  const int64_t B = config_.train.micro_batch, T = config_.model.seq_len;
  const int pp = layout_.shape.pp;
  const int stages = pp * layout_.virtual_stages;
  EvalIterator it(*ctx_.data.val, B, config_.train.eval_batches);
  Batch batch = it.make_batch();
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  std::vector<float> in, out, saved;
  double sums[3] = {0, 0, 0};  // loss sum, examples, valid targets (EvalSums.weight) if masked
  const bool masked = ctx_.data.val->masks_targets();
  const int64_t batches = it.num_batches();
  const int64_t rounds = (batches + replicas_ - 1) / replicas_;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t k = round * replicas_ + replica_;
    const bool counted = k < batches;
    it.fill(batch, counted ? k : batches - 1);
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
      } else if (tp_rank_ == 0 && counted) {
        const double task_loss = static_cast<double>(loss) - static_cast<double>(c.aux_loss());
        const double valid = static_cast<double>(
            std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
        sums[0] += task_loss * (masked ? valid : static_cast<double>(batch.size));
        sums[1] += static_cast<double>(batch.size);
        sums[2] += masked ? valid : 0.0;
      }
    }
  }
  return sum_over_ranks(EvalSums{.loss_sum = sums[0], .examples = sums[1], .weight = sums[2]},
                        ctx_.group.world.get());
}

// Parameters and every optimizer state buffer of each chunk, as tp-shard regions of the full
// tensors; optimizer state under "<state>/<tensor>" ("adamw.m/h.0.ln_1.weight"). Under ZeRO-1
// a rank declares the state of its own tensors only; the dp ranks together declare the same
// pieces as one unsharded rank, so the checkpoint is the same whatever parallel.zero.
std::vector<StatePiece> ModelParallelEngine::checkpoint_pieces() {
  std::vector<StatePiece> out;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!replica_syncs_.empty()) {
      for (StatePiece& p : replica_syncs_[c]->checkpoint_pieces()) out.push_back(p);
      continue;
    }
    GptStage& chunk = chunks_[c];
    for (StatePiece& p : tp_state_pieces(chunk.layout(), chunk.params())) out.push_back(p);
    for (StatePiece& p : updates_[c]->state_pieces()) out.push_back(p);
  }
  return out;
}

int64_t ModelParallelEngine::state_floats() {
  int64_t n = 0;
  for (auto& u : updates_) n += u->state_floats();
  for (auto& sync : replica_syncs_) {
    if (!sync->method().uses_optimizer()) continue;
    for (const StateView& v : sync->optimizer().state_tensors()) n += v.end - v.begin;
  }
  return n;
}

MoeTotals ModelParallelEngine::pipeline_moe_totals(bool run) {
  MoeTotals t;
  for (GptStage& c : chunks_) t.merge_stage(run ? c.moe_run_totals() : c.take_moe_totals());
  if (layout_.shape.pp == 1) return t;
  // Every pipeline rank's totals as they are (exact counts, unlike a float all-reduce once a
  // run's assignments pass 2^24), merged as further stages in pipeline order.
  static_assert(std::is_trivially_copyable_v<MoeTotals>);
  std::vector<MoeTotals> all(static_cast<size_t>(layout_.shape.pp));
  pp_->all_gather_bytes(reinterpret_cast<const uint8_t*>(&t),
                        reinterpret_cast<uint8_t*>(all.data()), sizeof(MoeTotals));
  MoeTotals pipeline;
  for (const MoeTotals& s : all) pipeline.merge_stage(s);
  return pipeline;
}

// As the data-parallel engine records them (dp_engine.cc): this replica's micro-batches.
void ModelParallelEngine::add_step_metrics(nlohmann::json& rec, bool applied, int64_t updates,
                                           bool last, const Traffic&) {
  rec["pipeline_bubble"] = last_bubble_;
  rec["activation_peak_mib"] = static_cast<double>(last_pool_bytes_) / (1 << 20);
  if (replicas_ > 1) rec["comm_exposed_ms"] = exposed_comm_s_ * 1e3;
  if (!replica_syncs_.empty()) {
    // This rank's dp bytes by formula: the loss and norm all-reduce, each chunk's exchange, and
    // on the last step the final sync of replicas that drift (DiLoCo).
    Traffic formula = replicas_wait_each_step()
                          ? all_reduce_f32_traffic(2, replicas_, replicas_comm_->rank())
                          : Traffic{};
    for (auto& sync : replica_syncs_) {
      if (applied) formula = formula + sync->exchange_traffic(updates);
      if (last) formula = formula + sync->finish_training(updates);
    }
    formula_total_ = formula_total_ + formula;
    rec["comm_formula_sent_bytes"] = formula.sent;
    rec["comm_formula_recv_bytes"] = formula.received;
    rec["comm_formula_rounds"] = formula.rounds;
  }
  if (!has_moe_) return;
  add_moe_step_metrics(rec, pipeline_moe_totals(false));
}

void ModelParallelEngine::add_summary(nlohmann::json& summary) {
  summary["mesh"] = layout_.to_string();
  summary["zero"] = zero_;
  summary["sync_method"] = config_.sync.method;
  if (!replica_syncs_.empty()) {
    summary["comm_formula_sent_bytes"] = formula_total_.sent;
    summary["comm_formula_recv_bytes"] = formula_total_.received;
  }
  // Optimizer-state floats per rank (world order), so the 1/dp saving of ZeRO-1 is visible.
  const int64_t mine = state_floats();
  std::vector<int64_t> all(static_cast<size_t>(ctx_.group.size()));
  ctx_.group.world->all_gather_bytes(reinterpret_cast<const uint8_t*>(&mine),
                                     reinterpret_cast<uint8_t*>(all.data()), sizeof(int64_t));
  summary["optimizer_state_floats"] = all;
  if (!has_moe_) return;
  add_moe_summary(summary, pipeline_moe_totals(true));
}

std::vector<CommChannel> ModelParallelEngine::comm_channels() {
  std::vector<CommChannel> out{{"world", &ctx_.group.world->stats()}};
  for (MeshAxis a : kMeshAxes) out.push_back({mesh_axis_name(a), &mesh_.comm(a).stats()});
  // With ep = 1 the replicas are the dp group itself, already listed.
  if (layout_.shape.ep > 1) out.push_back({"dp_ep", &replicas_comm_->stats()});
  if (embedding_) out.push_back({"embedding", &embedding_->stats()});
  return out;
}

}  // namespace

std::unique_ptr<TrainEngine> make_model_parallel_engine(TrainContext& ctx, HybridLayout layout) {
  return std::make_unique<ModelParallelEngine>(ctx, std::move(layout));
}

}  // namespace brigade
