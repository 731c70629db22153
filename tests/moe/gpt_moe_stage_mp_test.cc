// GPT pipeline stages with mixture-of-experts blocks (model/gpt_stage.h), pipelined (pp) and
// expert-parallel (ep), equal the single-process Gpt with the same MoE config.
//
// The reference, built by every process: a tp = 1 Gpt, weights perturbed, run over the dp x m
// micro-batches of the step with gradient accumulation (loss scale 1/(dp m)), where reference
// micro-batch d m + mb is the union of dp replica d's ep ranks' micro-batch mb, ep rank 0's
// sequences first: the tokens one ep group routes together (capacity and aux loss are per
// routing group). Each sequence ignores one
// target, so every micro-batch and every rank has the same number of valid targets and the
// global-batch mean the stages compute equals the reference's mean of micro-batch means.
//
// The run: a mesh pp x dp x ep, each (dp, ep) rank with its own slice of the data (its B
// sequences of each micro-batch), experts split over ep, stages driven by the pipeline
// executor. After the step: the tied wte copies summed over the embedding group, then
// DataParallel (parallel/ddp.h, after the step here): dense gradients
// averaged over the dp x ep replica group (Mesh::replica_comm), expert gradients over dp.
// Required:
//   - every stage starts from the Gpt's initialisation of its tensors (by name), and holds only
//     its ep rank's experts, under their global names; expert_ranges() + dense_ranges() tile it;
//   - the loss (summed over pp, averaged over dp x ep) equals the reference's, and the squared
//     global gradient norm (stage_grad_squares summed over pp) the sum of the reference's;
//   - the same routing: assignments, dropped assignments and the per-layer load imbalance,
//     summed over the stages and dp replicas, equal the reference's;
//   - every gradient, by name, within max |g - g_ref| <= 1e-4 max |g_ref| + 1e-7 (accumulation
//     order differs: per micro-batch and per rank; experts see their rows in another order
//     under ep); recomputation gives bitwise the same gradients;
//   - as many sets of MoE layers as the schedule has micro-batches in flight (simulator.h;
//     under ZB-H1 a set is free at B, before the W the simulator waits for).
// A wrong aux scale (1/m or x ep missing), a missing 1/ep on expert gradients, a stage fed
// another micro-batch's routing, or routing per rank instead of per group each move the loss or
// a gradient by far more than the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/mesh.h"
#include "brigade/model/gpt.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/parallel/ddp.h"
#include "brigade/parallel/expert/stage_grad_sync.h"
#include "brigade/parallel/pipeline/executor.h"
#include "brigade/parallel/pipeline/layer_partition.h"
#include "brigade/parallel/pipeline/simulator.h"
#include "brigade/parallel/pipeline/tied_embedding.h"
#include "brigade/tensor/rng.h"
#include "comm/multiprocess.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::AllRanksOk;
using testutil::run_ranks;
using testutil::TempDir;

constexpr int64_t kMicroBatch = 2;  // B: sequences per micro-batch on each ep rank
constexpr int kMicroBatches = 4;    // m
constexpr uint64_t kSeed = 7;

struct Case {
  ScheduleKind kind;
  int pp, ep;
  int top_k;
  double capacity_factor;
  int64_t moe_every;
  int dp = 1;
  std::string name() const {
    return std::string(schedule_kind_name(kind)) + " pp=" + std::to_string(pp) +
           " dp=" + std::to_string(dp) + " ep=" + std::to_string(ep) +
           " top_k=" + std::to_string(top_k) + " cf=" + std::to_string(capacity_factor) +
           " moe_every=" + std::to_string(moe_every);
  }
  GptConfig model() const {
    GptConfig c{.vocab = 37, .seq_len = 8, .d_model = 16, .n_layer = 4, .n_head = 2};
    c.n_experts = 4;
    c.moe_top_k = top_k;
    c.capacity_factor = capacity_factor;
    c.aux_loss_coef = 0.1;  // large enough that a wrong aux gradient scale shows
    c.moe_every = moe_every;
    return c;
  }
};

// The global batch: dp replicas x m micro-batches x ep ranks x B sequences, reference order.
struct Data {
  std::vector<int32_t> tokens, targets;
};

Data make_data(const GptConfig& c, int dp, int ep) {
  const int64_t T = c.seq_len, n = dp * kMicroBatches * ep * kMicroBatch * T;
  Data d;
  for (int64_t i = 0; i <= n; ++i) {
    const auto tok = static_cast<int32_t>(random_uniform(5, 1, static_cast<uint64_t>(i)) *
                                          static_cast<float>(c.vocab));
    if (i < n) d.tokens.push_back(tok);
    if (i > 0) d.targets.push_back(i % T == 3 ? -1 : tok);  // one ignored target per sequence
  }
  return d;
}

// Rank r's own stream: its B sequences of each micro-batch.
Data slice_for_rank(const Data& all, const GptConfig& c, int ep, int dp_rank, int r) {
  const int64_t seq = kMicroBatch * c.seq_len;  // one rank's part of a micro-batch
  Data d;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    const int64_t begin = ((static_cast<int64_t>(dp_rank) * kMicroBatches + mb) * ep + r) * seq;
    d.tokens.insert(d.tokens.end(), all.tokens.begin() + begin, all.tokens.begin() + begin + seq);
    d.targets.insert(d.targets.end(), all.targets.begin() + begin,
                     all.targets.begin() + begin + seq);
  }
  return d;
}

struct Reference {
  ParamLayout layout;
  std::vector<float> init, params, grads;
  float loss = 0.0f;
  MoeTotals totals;
};

Reference reference(const GptConfig& c, const Data& data, int dp, int ep) {
  const int64_t mb_size = ep * kMicroBatch, mb_tokens = mb_size * c.seq_len;
  Gpt model(c, mb_size);
  model.initialize(kSeed);
  Reference r;
  r.layout = model.layout();
  r.init.assign(model.params(), model.params() + model.num_params());
  testing::perturb_params(model, 0.1f, 8);
  model.zero_grads();
  double loss = 0.0;
  const int micro_batches = dp * kMicroBatches;
  for (int mb = 0; mb < micro_batches; ++mb) {
    Batch b;
    b.size = mb_size;
    b.tokens.assign(data.tokens.begin() + mb * mb_tokens,
                    data.tokens.begin() + (mb + 1) * mb_tokens);
    b.targets.assign(data.targets.begin() + mb * mb_tokens,
                     data.targets.begin() + (mb + 1) * mb_tokens);
    loss += model.forward(b) / static_cast<double>(micro_batches);
    model.backward(b, 1.0f / static_cast<float>(micro_batches));
  }
  r.loss = static_cast<float>(loss);
  r.totals = model.take_moe_totals();
  r.params.assign(model.params(), model.params() + model.num_params());
  r.grads.assign(model.grads(), model.grads() + model.num_params());
  return r;
}

struct StepResult {
  float loss = 0.0f;  // this rank's StepStats::loss
  std::vector<float> grads;
  MoeTotals totals;
};

StepResult run_step(Communicator& pp, Communicator* embedding, const Case& c, GptStage& stage,
                    bool recompute) {
  ExecutorOptions opt;
  opt.recompute.assign(1, recompute);
  PipelineExecutor exec(pp, build_schedule(c.kind, {c.pp, kMicroBatches, 1}), {&stage}, opt);
  StepResult r;
  for (int step = 0; step < 2; ++step) {  // the second step reuses the MoE layer sets
    stage.zero_grads();
    r.loss = exec.run_step().loss;
    GptStage* chunks[] = {&stage};
    sum_tied_embedding_grads(embedding, chunks);
    r.totals = stage.take_moe_totals();
  }
  r.grads.assign(stage.grads(), stage.grads() + stage.num_params());
  return r;
}

void check_case(const Case& c) {
  SCOPED_TRACE(c.name());
  const GptConfig cfg = c.model();
  TempDir dir;
  const int world = c.pp * c.dp * c.ep;
  auto result = run_ranks(world, 120s, [&](int rank) {
    const Data all = make_data(cfg, c.dp, c.ep);
    const Reference ref = reference(cfg, all, c.dp, c.ep);
    if (c.capacity_factor > 0) {
      ASSERT_GT(ref.totals.dropped, 0) << "the case must drop";
    }

    CommOptions w;
    w.rank = rank;
    w.size = world;
    w.timeout = 30s;
    w.store = std::make_shared<FileStore>(dir.path(), 30s);
    Mesh mesh(MeshShape{.pp = c.pp, .dp = c.dp, .ep = c.ep}, w);
    mesh.init_comms();
    Communicator& pp = mesh.comm(MeshAxis::kPP);
    Communicator& replicas = mesh.replica_comm();
    std::unique_ptr<Communicator> embedding = create_embedding_group(w, mesh);
    const int pp_rank = mesh.coord(MeshAxis::kPP), ep_rank = mesh.coord(MeshAxis::kEP);
    Communicator* ep = c.ep > 1 ? &mesh.comm(MeshAxis::kEP) : nullptr;

    const std::vector<int> bounds = stage_boundaries(balance_layers(gpt_layer_params(cfg), c.pp));
    GptStage stage(GptStageConfig{.model = cfg,
                                  .first_layer = bounds[pp_rank],
                                  .end_layer = bounds[pp_rank + 1],
                                  .micro_batch = kMicroBatch},
                   {}, ep);

    // Layout: the Gpt's initial values by name; only this ep rank's experts; ranges tile it.
    stage.initialize(kSeed);
    const int64_t per_rank = cfg.n_experts / c.ep;
    int experts_held = 0;
    for (const ParamSpec& s : stage.layout().specs()) {
      const ParamSpec& f = ref.layout.at(s.name);
      ASSERT_EQ(s.numel, f.numel) << s.name;
      EXPECT_TRUE(std::equal(stage.params() + s.offset, stage.params() + s.offset + s.numel,
                             ref.init.begin() + f.offset))
          << "init of " << s.name;
      std::copy(ref.params.begin() + f.offset, ref.params.begin() + f.offset + f.numel,
                stage.params() + s.offset);
      const size_t at = s.name.find(".experts.");
      if (at == std::string::npos) continue;
      const int e = std::stoi(s.name.substr(at + 9));
      EXPECT_EQ(e / per_rank, ep_rank) << s.name << " held by ep rank " << ep_rank;
      ++experts_held;
      bool in_expert_range = false;
      for (const ParamGroup& g : stage.expert_ranges())
        in_expert_range |= s.offset >= g.begin && s.offset + s.numel <= g.end;
      EXPECT_TRUE(in_expert_range) << s.name;
    }
    int moe_blocks = 0;
    for (int l = bounds[pp_rank]; l < bounds[pp_rank + 1]; ++l) moe_blocks += cfg.moe_block(l);
    EXPECT_EQ(experts_held, moe_blocks * per_rank * 4);  // 4 tensors per expert
    std::vector<ParamGroup> tiles = stage.expert_ranges();
    tiles.insert(tiles.end(), stage.dense_ranges().begin(), stage.dense_ranges().end());
    std::sort(tiles.begin(), tiles.end(),
              [](const ParamGroup& a, const ParamGroup& b) { return a.begin < b.begin; });
    int64_t covered = 0;
    for (const ParamGroup& g : tiles) {
      EXPECT_EQ(g.begin, covered);
      covered = g.end;
    }
    EXPECT_EQ(covered, stage.num_params());

    const Data mine = slice_for_rank(all, cfg, c.ep, mesh.coord(MeshAxis::kDP), ep_rank);
    stage.set_batch(mine.tokens.data(), mine.targets.data(), kMicroBatches);
    StepResult kept = run_step(pp, embedding.get(), c, stage, false);
    // One set of MoE layers per micro-batch in flight, created in the first step only.
    const SimulationResult sim = simulate(build_schedule(c.kind, {c.pp, kMicroBatches, 1}));
    // The simulator counts a micro-batch until its W; a set is free after B (ZB-H1 defers W).
    if (c.kind == ScheduleKind::kZbH1) {
      EXPECT_LE(stage.moe_layer_sets(), sim.peak_in_flight[pp_rank]);
      EXPECT_GE(stage.moe_layer_sets(), 1);
    } else {
      EXPECT_EQ(stage.moe_layer_sets(), sim.peak_in_flight[pp_rank]);
    }
    const StepResult recomputed = run_step(pp, embedding.get(), c, stage, true);
    EXPECT_EQ(recomputed.grads, kept.grads) << "recomputation changed the gradients";
    EXPECT_EQ(recomputed.loss, kept.loss);

    // Gradients averaged over their replicas: dense over dp x ep, experts over dp (in small
    // buckets, so that ranges are cut).
    Communicator& dp = mesh.comm(MeshAxis::kDP);
    DataParallel average(replicas, stage,
                         DdpOptions{.bucket_elems = 97,
                                    .overlap = false,
                                    .group = stage.expert_ranges(),
                                    .group_comm = &dp});
    average.arm();
    average.finish();
    const float* grads = stage.grads();
    float loss = kept.loss;
    pp.all_reduce(&loss, 1, ReduceOp::kSum);
    replicas.all_reduce(&loss, 1, ReduceOp::kAvg);
    EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << "loss " << loss << " vs " << ref.loss;

    // The global norm: the tied wte copy left out, experts summed over ep, stages over pp.
    ParamLayout norm_layout;
    for (const ParamSpec& s : stage.layout().specs())
      if (!(stage.holds_tied_copy() && s.name == "wte.weight")) norm_layout.add(s);
    float squares = static_cast<float>(stage_grad_squares(stage, norm_layout, {}, ep));
    pp.all_reduce(&squares, 1, ReduceOp::kSum);
    double ref_squares = 0.0;
    for (float g : ref.grads) ref_squares += static_cast<double>(g) * g;
    EXPECT_NEAR(squares, ref_squares, 1e-4 * ref_squares);

    // The same routing, summed over the stages and the dp replicas (micro_batches is the
    // step's count).
    double t[4] = {static_cast<double>(kept.totals.layer_forwards),
                   static_cast<double>(kept.totals.assignments),
                   static_cast<double>(kept.totals.dropped), kept.totals.imbalance_sum};
    std::vector<float> tf(t, t + 4);  // exact: every value is a small integer or sum of ratios
    pp.all_reduce(tf.data(), 4, ReduceOp::kSum);
    dp.all_reduce(tf.data(), 4, ReduceOp::kSum);
    EXPECT_EQ(kept.totals.micro_batches, kMicroBatches);
    EXPECT_EQ(static_cast<int64_t>(tf[0]), ref.totals.layer_forwards);
    EXPECT_EQ(static_cast<int64_t>(tf[1]), ref.totals.assignments);
    EXPECT_EQ(static_cast<int64_t>(tf[2]), ref.totals.dropped);
    EXPECT_NEAR(tf[3], ref.totals.imbalance_sum, 1e-4 * ref.totals.imbalance_sum);

    for (const ParamSpec& s : stage.layout().specs()) {
      const ParamSpec& f = ref.layout.at(s.name);
      float max_ref = 0.0f, max_diff = 0.0f;
      for (int64_t i = 0; i < f.numel; ++i)
        max_ref = std::max(max_ref, std::fabs(ref.grads[f.offset + i]));
      for (int64_t i = 0; i < s.numel; ++i)
        max_diff = std::max(max_diff, std::fabs(grads[s.offset + i] - ref.grads[f.offset + i]));
      EXPECT_LE(max_diff, 1e-4f * max_ref + 1e-7f)
          << "pp rank " << pp_rank << " ep rank " << ep_rank << " " << s.name << " (max |g_ref| "
          << max_ref << ")";
    }
    if (rank == world - 1)
      std::printf("%s: loss %.6f (ref %.6f), %lld of %lld assignments dropped\n", c.name().c_str(),
                  loss, ref.loss, static_cast<long long>(ref.totals.dropped),
                  static_cast<long long>(ref.totals.assignments));
  });
  EXPECT_TRUE(AllRanksOk(result));
}

TEST(GptMoeStage, Pp2EqualsOneProcess) {
  check_case({ScheduleKind::k1F1B, 2, 1, 1, 1.0, 2});
  check_case({ScheduleKind::kZbH1, 2, 1, 2, 0.0, 1});  // split backward: MoE stays fused in B
}

TEST(GptMoeStage, Ep2EqualsEp1) {
  check_case({ScheduleKind::k1F1B, 1, 2, 1, 1.0, 1});
  check_case({ScheduleKind::k1F1B, 1, 2, 2, 1.25, 2});
}

TEST(GptMoeStage, Pp2Ep2EqualsOneProcess) {
  check_case({ScheduleKind::k1F1B, 2, 2, 2, 1.0, 1});
  check_case({ScheduleKind::kGPipe, 2, 2, 1, 1.0, 2});  // every micro-batch in flight at once
}

// "ep is carved out of dp": 4 ranks, two ep groups of two, each with its own data; experts
// averaged over dp, everything else over dp x ep.
TEST(GptMoeStage, Dp2Ep2EqualsOneProcess) {
  check_case({ScheduleKind::k1F1B, 1, 2, 1, 1.0, 1, 2});
}

TEST(GptMoeStage, RejectsTensorParallelAndIndivisibleEp) {
  TempDir dir;
  auto result = run_ranks(3, 60s, [&](int rank) {
    GptConfig cfg = Case{ScheduleKind::k1F1B, 1, 1, 1, 1.0, 1}.model();
    CommOptions w;
    w.rank = rank;
    w.size = 3;
    w.timeout = 30s;
    w.store = std::make_shared<FileStore>(dir.path(), 30s);
    Mesh mesh(MeshShape{.ep = 3}, w);
    // 4 experts over 3 ep ranks.
    try {
      GptStage s(GptStageConfig{.model = cfg, .first_layer = 0, .end_layer = 4}, {},
                 &mesh.comm(MeshAxis::kEP));
      ADD_FAILURE() << "no error for ep = 3";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("model.n_experts = 4"), std::string::npos) << m;
      EXPECT_NE(m.find("parallel.ep = 3"), std::string::npos) << m;
    }
    mesh.comm(MeshAxis::kEP).barrier();
    // Rank 2 leaves only when ranks 0 and 1 are done: its closing connections must not reach
    // them while the barrier's last messages may still be in flight (seen once under load:
    // rank 1's barrier failed with the peer gone).
    if (rank == 2) {
      w.store->wait({"tp-done-0", "tp-done-1"});
      return;
    }
    // MoE under tensor parallelism: a tp = 2 group of ranks 0 and 1.
    const std::vector<int> tp_ranks = {0, 1};
    auto tp = create_subgroup(w, tp_ranks, "tp");
    try {
      GptStage s(GptStageConfig{.model = cfg, .first_layer = 0, .end_layer = 4},
                 TpContext{.comm = tp.get()});
      ADD_FAILURE() << "no error for tp = 2";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("model.n_experts"), std::string::npos) << m;
      EXPECT_NE(m.find("parallel.tp = 2"), std::string::npos) << m;
    }
    w.store->set("tp-done-" + std::to_string(rank), {'1'});
    // Neither tp rank leaves before the other is done: Gloo may count a pair as connected on one
    // side while the other still reads its handshake (seen under load: rank 1's connect failed
    // with rank 0 gone).
    w.store->wait({"tp-done-0", "tp-done-1"});
  });
  EXPECT_TRUE(AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
