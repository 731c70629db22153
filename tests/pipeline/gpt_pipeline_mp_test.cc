// The GPT cut into pipeline stages (model/gpt_stage.h) equals the single-process Gpt on the same
// global batch. Every process builds the reference itself: a tp = 1 Gpt over all m micro-batches
// as one batch, its weights perturbed so no gradient is trivially structured. Each rank's
// GptStage chunks (blocks balanced by parameter count) must
//   - start from exactly the Gpt's initialisation of their tensors (bitwise, by name),
//   - give the reference loss on the last stage, and for every tensor they hold (by GPT-2 name,
//     tp shards mapped through ParamSpec::full_index) the reference gradient, once the tied
//     wte's two copies are summed over the embedding group; both copies then agree bitwise,
//   - give bitwise the same gradients with activation recomputation, and hold as many
//     micro-batches of activations at once as the schedule's simulation says,
// for PP = 2 and 4 with GPipe, 1F1B, interleaved (v = 2 where there are layers enough) and
// ZB-H1, and for PP = 2 x TP = 2 (with and without sequence parallelism) over a 2-axis mesh.
// Under ZB-H1 the stages split their backward (gpt_stage.h): each micro-batch's B must leave the
// matmul weight gradients alone and its W, which the executor must run after that B, add them.
//
// Tolerance, per tensor: max |g - g_ref| <= 1e-4 max |g_ref| + 1e-7, and |loss - loss_ref| <=
// 1e-5 loss_ref. The pipeline sums weight gradients micro-batch by micro-batch where the
// reference runs one matmul over the whole batch, and the loss per micro-batch; a missing term
// (an unsummed wte copy, a stage fed the wrong micro-batch) is off by O(max |g_ref|).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/mesh.h"
#include "brigade/model/gpt.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/parallel/pipeline/executor.h"
#include "brigade/parallel/pipeline/layer_partition.h"
#include "brigade/parallel/pipeline/simulator.h"
#include "brigade/parallel/pipeline/tied_embedding.h"
#include "brigade/tensor/rng.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"
#include "model/grad_check.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::AllRanksOk;
using testutil::run_ranks;
using testutil::TempDir;

const GptConfig kCfg{.vocab = 67, .seq_len = 16, .d_model = 32, .n_layer = 4, .n_head = 4};
constexpr int64_t kMicroBatch = 2;
constexpr uint64_t kSeed = 7;

struct Reference {
  std::vector<int32_t> tokens, targets;
  std::vector<float> init, params, grads;  // the tp = 1 layout
  ParamLayout layout;
  float loss = 0.0f;
};

// The single-process model on the whole global batch of m micro-batches.
Reference reference(int m) {
  const int64_t n = m * kMicroBatch;
  Gpt model(kCfg, n);
  model.initialize(kSeed);
  Reference r;
  r.init.assign(model.params(), model.params() + model.num_params());
  testing::perturb_params(model, 0.05f, 8);
  Batch b;
  b.size = n;
  const int64_t tokens = n * kCfg.seq_len;
  for (int64_t i = 0; i <= tokens; ++i) {
    const auto tok = static_cast<int32_t>(random_uniform(5, 1, static_cast<uint64_t>(i)) *
                                          static_cast<float>(kCfg.vocab));
    if (i < tokens) b.tokens.push_back(tok);
    if (i > 0) b.targets.push_back(tok);
  }
  b.targets[3] = -1;  // ignored targets: the mean is over the valid ones of the global batch
  b.targets[tokens - 5] = -1;
  r.loss = model.forward(b);
  model.zero_grads();
  model.backward(b, 1.0f);
  r.tokens = b.tokens;
  r.targets = b.targets;
  r.params.assign(model.params(), model.params() + model.num_params());
  r.grads.assign(model.grads(), model.grads() + model.num_params());
  r.layout = model.layout();
  return r;
}

struct Setup {
  ScheduleKind kind;
  int pp, m, v;
  int tp = 1;
  bool sp = false;
  std::string name() const {
    return std::string(schedule_kind_name(kind)) + " pp=" + std::to_string(pp) +
           " m=" + std::to_string(m) + " v=" + std::to_string(v) + " tp=" + std::to_string(tp) +
           (sp ? " sp" : "");
  }
};

// This rank's chunks (global stage c * pp + pp_rank), weights sliced from the reference.
std::vector<GptStage> make_chunks(const Setup& s, int pp_rank, const TpContext& tp,
                                  const Reference& ref) {
  const std::vector<int> bounds =
      stage_boundaries(balance_layers(gpt_layer_params(kCfg), s.pp * s.v));
  std::vector<GptStage> chunks;  // grows by moving: a stage must survive that
  for (int c = 0; c < s.v; ++c) {
    const int stage = c * s.pp + pp_rank;
    chunks.emplace_back(GptStageConfig{.model = kCfg,
                                       .first_layer = bounds[stage],
                                       .end_layer = bounds[stage + 1],
                                       .micro_batch = kMicroBatch},
                        tp);
    GptStage& g = chunks.back();
    // Initialisation is the single-process model's, tensor by tensor.
    g.initialize(kSeed);
    std::vector<float> want(static_cast<size_t>(g.num_params()));
    slice_from_full(g.layout(), ref.layout, ref.init.data(), want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), g.params())) << "stage " << stage << " init";
    slice_from_full(g.layout(), ref.layout, ref.params.data(), g.params());
    g.set_batch(ref.tokens.data(), ref.targets.data(), s.m);
  }
  return chunks;
}

// Forwards to a GptStage and checks that the executor runs the split backward the schedule has:
// a micro-batch's B leaves the blocks' matmul weight gradients alone (one of them watched: the
// chunk's first c_attn weight) and its W, run after its B, adds them.
class SplitCheckingStage : public PipelineStage {
 public:
  explicit SplitCheckingStage(GptStage& stage, int micro_batches)
      : stage_(stage), state_(static_cast<size_t>(micro_batches), kNone) {
    for (const ParamSpec& s : stage.layout().specs()) {
      if (s.name.find("attn.c_attn.weight") == std::string::npos) continue;
      watched_ = &s;
      break;
    }
    BRIGADE_CHECK(watched_ != nullptr) << "a GPT stage has blocks";
  }
  int64_t input_floats() const override { return stage_.input_floats(); }
  int64_t output_floats() const override { return stage_.output_floats(); }
  int64_t saved_floats() const override { return stage_.saved_floats(); }
  float forward(int mb, const float* input, float* output, float* saved) override {
    // A second forward of mb before its B is recomputation.
    EXPECT_LE(state_[static_cast<size_t>(mb)], kForward) << "F after B, mb " << mb;
    state_[static_cast<size_t>(mb)] = kForward;
    return stage_.forward(mb, input, output, saved);
  }
  void backward_input(int mb, const float* input, const float* dout, float* dinput,
                      float* saved) override {
    EXPECT_EQ(state_[static_cast<size_t>(mb)], kForward) << "B before F, mb " << mb;
    const std::vector<float> before = watched();
    stage_.backward_input(mb, input, dout, dinput, saved);
    EXPECT_EQ(watched(), before) << "B of mb " << mb << " touched " << watched_->name;
    state_[static_cast<size_t>(mb)] = kInput;
  }
  void backward_weight(int mb, const float* input, const float* saved) override {
    EXPECT_EQ(state_[static_cast<size_t>(mb)], kInput) << "W before B, mb " << mb;
    const std::vector<float> before = watched();
    stage_.backward_weight(mb, input, saved);
    EXPECT_NE(watched(), before) << "W of mb " << mb << " left " << watched_->name;
    state_[static_cast<size_t>(mb)] = kWeight;
  }
  bool all_done() const {
    return std::all_of(state_.begin(), state_.end(), [](int s) { return s == kWeight; });
  }
  void reset() { std::fill(state_.begin(), state_.end(), kNone); }

 private:
  enum : int { kNone, kForward, kInput, kWeight };
  std::vector<float> watched() const {
    const float* g = stage_.grads() + watched_->offset;
    return {g, g + watched_->numel};
  }
  GptStage& stage_;
  const ParamSpec* watched_ = nullptr;
  std::vector<int> state_;
};

struct StepResult {
  float loss = 0.0f;
  int peak_slots = 0;
  std::vector<std::vector<float>> grads;  // per chunk
};

StepResult run_pipeline(Communicator& pp, Communicator* embedding, const Setup& s,
                        std::vector<GptStage>& chunks, bool recompute, int steps) {
  const Schedule schedule = build_schedule(s.kind, {s.pp, s.m, s.v});
  std::vector<PipelineStage*> stages;
  std::vector<GptStage*> gpt;
  std::vector<std::unique_ptr<SplitCheckingStage>> checked;  // when the schedule splits B and W
  for (GptStage& c : chunks) {
    if (schedule.split_backward()) {
      checked.push_back(std::make_unique<SplitCheckingStage>(c, s.m));
      stages.push_back(checked.back().get());
    } else {
      stages.push_back(&c);
    }
    gpt.push_back(&c);
  }
  ExecutorOptions opt;
  opt.recompute.assign(chunks.size(), recompute);
  PipelineExecutor exec(pp, schedule, stages, opt);
  StepResult r;
  for (int step = 0; step < steps; ++step) {  // a second step reuses pooled buffers and tags
    for (GptStage& c : chunks) c.zero_grads();
    for (auto& c : checked) c->reset();
    const StepStats stats = exec.run_step();
    for (auto& c : checked) EXPECT_TRUE(c->all_done()) << "a micro-batch without its W";
    r.loss = stats.loss;
    r.peak_slots = stats.peak_slots;
    sum_tied_embedding_grads(embedding, gpt);
  }
  for (GptStage& c : chunks) r.grads.emplace_back(c.grads(), c.grads() + c.num_params());
  return r;
}

// Every tensor of the chunk against the reference gradient of the same name.
void expect_grads_match(const GptStage& chunk, const std::vector<float>& grads,
                        const Reference& ref, const std::string& where) {
  for (const ParamSpec& s : chunk.layout().specs()) {
    const ParamSpec& f = ref.layout.at(s.name);
    float max_ref = 0.0f, max_diff = 0.0f;
    for (int64_t i = 0; i < f.numel; ++i)
      max_ref = std::max(max_ref, std::fabs(ref.grads[f.offset + i]));
    for (int64_t i = 0; i < s.numel; ++i) {
      const float g = grads[static_cast<size_t>(s.offset + i)];
      const int64_t j = s.full_index(i);
      max_diff = std::max(max_diff, std::fabs(g - (j < 0 ? 0.0f : ref.grads[f.offset + j])));
    }
    EXPECT_GT(max_ref, 0.0f) << s.name;
    EXPECT_LE(max_diff, 1e-4f * max_ref + 1e-7f) << where << " " << s.name;
  }
}

void check_equivalence(const Setup& s) {
  SCOPED_TRACE(s.name());
  TempDir dir;
  const int world = s.pp * s.tp;
  auto result = run_ranks(world, 60s, [&](int rank) {
    const Reference ref = reference(s.m);
    CommOptions w;
    w.rank = rank;
    w.size = world;
    w.timeout = 20s;
    w.store = std::make_shared<FileStore>(dir.path(), 20s);
    Mesh mesh(MeshShape{.pp = s.pp, .tp = s.tp}, w);
    Communicator& pp = mesh.comm(MeshAxis::kPP);
    TpContext tp;
    if (s.tp > 1) tp = TpContext{.comm = &mesh.comm(MeshAxis::kTP), .sequence_parallel = s.sp};
    std::unique_ptr<Communicator> embedding = create_embedding_group(w, mesh);
    const int pp_rank = mesh.coord(MeshAxis::kPP);

    std::vector<GptStage> chunks = make_chunks(s, pp_rank, tp, ref);
    const StepResult kept = run_pipeline(pp, embedding.get(), s, chunks, false, 2);
    const StepResult recomputed = run_pipeline(pp, embedding.get(), s, chunks, true, 1);

    if (pp_rank == s.pp - 1) {  // the last stage: chunk v - 1 of the last pipeline rank
      EXPECT_LE(std::fabs(kept.loss - ref.loss), 1e-5f * ref.loss)
          << kept.loss << " vs " << ref.loss;
    } else {
      EXPECT_EQ(kept.loss, 0.0f);
    }
    EXPECT_EQ(recomputed.loss, kept.loss);
    // The executor held the activations of as many micro-batches as the schedule says.
    const SimulationResult sim = simulate(build_schedule(s.kind, {s.pp, s.m, s.v}));
    EXPECT_EQ(kept.peak_slots, sim.peak_in_flight[pp_rank]);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const std::string where = "pp rank " + std::to_string(pp_rank) + " chunk " +
                                std::to_string(c) + " tp rank " + std::to_string(tp.rank());
      expect_grads_match(chunks[c], kept.grads[c], ref, where);
      EXPECT_EQ(recomputed.grads[c], kept.grads[c]) << "recomputation changed " << where;
    }
    // The two wte copies hold the same summed gradient, bit for bit.
    if (embedding) {
      for (size_t c = 0; c < chunks.size(); ++c) {
        if (chunks[c].wte_offset() < 0) continue;
        std::vector<float> mine(
            kept.grads[c].begin() + chunks[c].wte_offset(),
            kept.grads[c].begin() + chunks[c].wte_offset() + chunks[c].wte_numel());
        std::vector<float> first = mine;
        embedding->broadcast(first.data(), chunks[c].wte_numel(), 0);
        EXPECT_EQ(first, mine) << "wte copies differ";
      }
    }
  });
  EXPECT_TRUE(AllRanksOk(result));
}

TEST(GptPipeline, Pp2EverySchedule) {
  check_equivalence({ScheduleKind::kGPipe, 2, 4, 1});
  check_equivalence({ScheduleKind::k1F1B, 2, 4, 1});
  check_equivalence({ScheduleKind::kInterleaved, 2, 4, 2});
  check_equivalence({ScheduleKind::kZbH1, 2, 4, 1});
}

TEST(GptPipeline, Pp4EverySchedule) {
  check_equivalence({ScheduleKind::kGPipe, 4, 8, 1});
  check_equivalence({ScheduleKind::k1F1B, 4, 8, 1});
  check_equivalence({ScheduleKind::kZbH1, 4, 8, 1});
  // Interleaving 4 ranks x 2 chunks needs 8 stages: 4 layers cannot fill them.
  EXPECT_THROW(validate_schedule(ScheduleKind::kInterleaved, {4, 8, 2}, kCfg.n_layer), ConfigError);
}

TEST(GptPipeline, Pp2Tp2) {
  check_equivalence({ScheduleKind::k1F1B, 2, 4, 1, 2, false});
  check_equivalence({ScheduleKind::kInterleaved, 2, 4, 2, 2, true});
  // The split backward under tensor parallelism: B runs every tp collective, W none; with
  // sequence parallelism W's row-parallel output gradients get their own saved space.
  check_equivalence({ScheduleKind::kZbH1, 2, 4, 1, 2, false});
  check_equivalence({ScheduleKind::kZbH1, 2, 4, 1, 2, true});
}

TEST(GptPipeline, LayerSplitAndBadStages) {
  // Balanced by parameter count: the embedding-heavy ends take no more than the middle.
  const GptConfig big{.vocab = 5000, .seq_len = 16, .d_model = 32, .n_layer = 8, .n_head = 4};
  const std::vector<int> split = balance_layers(gpt_layer_params(big), 4);
  EXPECT_EQ(split.size(), 4u);
  EXPECT_LE(split.front(), split[1]);
  EXPECT_LE(split.back(), split[1]);
  EXPECT_THROW(GptStage(GptStageConfig{.model = kCfg, .first_layer = 2, .end_layer = 2}),
               ConfigError);
  EXPECT_THROW(GptStage(GptStageConfig{.model = kCfg, .first_layer = 0, .end_layer = 5}),
               ConfigError);
  // A middle stage holds neither wte nor wpe; the ends hold wte.
  GptStage middle(GptStageConfig{.model = kCfg, .first_layer = 1, .end_layer = 3});
  EXPECT_EQ(middle.wte_offset(), -1);
  EXPECT_EQ(middle.layout().find("wpe.weight"), nullptr);
  EXPECT_EQ(middle.layout().specs().front().name, "h.1.ln_1.weight");
  GptStage last(GptStageConfig{.model = kCfg, .first_layer = 3, .end_layer = 4});
  EXPECT_TRUE(last.holds_tied_copy());
  EXPECT_EQ(last.layout().specs().back().name, "wte.weight");
  EXPECT_EQ(middle.input_floats(), kCfg.seq_len * kCfg.d_model);
}

}  // namespace
}  // namespace brigade
