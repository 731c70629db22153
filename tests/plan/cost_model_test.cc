// The cost model of `brigade plan` (plan/cost_model.h) against independent references: the
// parameters and activation floats it counts for every pipeline rank against the real GptStage
// chunks the model-parallel engine builds (tp shards and ep ranks' experts from real groups of
// threads), the ZeRO bytes per parameter of Rajbhandari et al. for f32 AdamW, the pipeline
// bubble of the 1F1B closed form, and DiLoCo's bytes against DDP's.
#include "brigade/plan/cost_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/file_store.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/train/model_factory.h"
#include "common/layout_gpt.h"

namespace brigade {
namespace {

Config gpt(int64_t tp, int64_t pp, int64_t m = 4) {
  Config c = testing::layout_gpt(tp, pp);
  c.model.vocab = 250;  // not a multiple of tp: the padded vocabulary is counted too
  c.train.grad_accum = m;
  return c;
}

ClusterSpec cluster(int64_t world) {
  ClusterSpec c;
  c.processes_per_node = world;
  c.devices_per_node = world;
  c.device = {.peak_flops = 1e11,
              .gemm_flops = 5e10,
              .attention_flops = 3e10,
              .elementwise_gbs = 10,
              .memory_bandwidth_gbs = 10,
              .memory_gib = 1,
              .watts = 5};
  c.node_link = {.bandwidth_gbit = 10, .latency_us = 10};
  return c;
}

struct Real {
  int64_t params = 0;
  int64_t saved = 0;
};

// Every chunk of pipeline rank pp_rank as the model-parallel engine builds it, on rank 0 of a
// real tp group or ep group (threads of this process over loopback; one of them is 1).
Real real_rank(const Config& config, const JobPlan& plan, int pp_rank) {
  GptConfig m = gpt_config(config.model);
  m.recompute_blocks = config.train.recompute == RecomputeMode::kBlock;
  const int tp = plan.mesh.shape.tp, ep = plan.mesh.shape.ep;
  const int group = tp * ep;
  std::vector<Real> by_tp(static_cast<size_t>(group));
  const std::string dir = std::string(BRIGADE_TEST_TMP) + "/plan-tp-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::vector<std::thread> threads;
  for (int r = 0; r < group; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      TpContext ctx;
      if (group > 1) {
        CommOptions o{.rank = r, .size = group, .group_name = tp > 1 ? "tp" : "ep"};
        o.store = std::make_shared<FileStore>(dir, std::chrono::seconds(30));
        comm = create_communicator(o);
      }
      if (tp > 1) {
        ctx = TpContext{.comm = comm.get(), .sequence_parallel = plan.mesh.sequence_parallel};
      }
      for (int c = 0; c < plan.mesh.virtual_stages; ++c) {
        const int stage = c * plan.mesh.shape.pp + pp_rank;
        GptStage chunk(GptStageConfig{.model = m,
                                      .first_layer = plan.mesh.stage_bounds[stage],
                                      .end_layer = plan.mesh.stage_bounds[stage + 1],
                                      .micro_batch = config.train.micro_batch,
                                      .split_backward = !m.recompute_blocks},
                       ctx, ep > 1 ? comm.get() : nullptr);
        by_tp[static_cast<size_t>(r)].params += chunk.num_params();
        by_tp[static_cast<size_t>(r)].saved += chunk.saved_floats();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::filesystem::remove_all(dir);
  return by_tp[0];
}

TEST(CostModel, FootprintEqualsTheEnginesChunks) {
  struct Case {
    int64_t tp, pp, v;
    const char* schedule;
    bool recompute, sp;
    int64_t ep = 1;  // > 1: 4 experts in every other block, split over ep
  };
  for (const Case& k :
       {Case{1, 2, 1, "1f1b", false, false}, Case{1, 4, 1, "zb-h1", false, false},
        Case{1, 2, 2, "interleaved", false, false}, Case{2, 1, 1, "1f1b", false, false},
        Case{2, 2, 1, "1f1b", true, false}, Case{2, 2, 1, "1f1b", false, true},
        Case{1, 1, 1, "1f1b", false, false, 2}, Case{1, 2, 1, "zb-h1", false, false, 2}}) {
    Config c = testing::layout_gpt(k.tp, k.pp, k.ep);
    c.model.vocab = 250;  // not a multiple of tp: the padded vocabulary is counted too
    if (k.ep > 1) c.model.moe_every = 2;
    c.parallel.virtual_stages = k.v;
    c.parallel.schedule = k.schedule;
    c.parallel.sequence_parallel = k.sp;
    c.train.recompute = k.recompute ? RecomputeMode::kBlock : RecomputeMode::kNone;
    const JobPlan plan = plan_job(c, k.tp * k.pp * k.ep);
    for (int r = 0; r < k.pp; ++r) {
      const StageFootprint f = stage_footprint(c, plan, r);
      const Real real = real_rank(c, plan, r);
      const std::string where =
          fmt::format("{} recompute {} pp rank {}", plan.mesh.to_string(), c.train.recompute, r);
      EXPECT_EQ(f.params, real.params) << where;
      EXPECT_EQ(f.saved_floats, real.saved) << where;
    }
  }
}

TEST(CostModel, WholeModelParametersAreTheModels) {
  const Config c = gpt(1, 1);
  const JobPlan plan = plan_job(c, 2);
  const std::unique_ptr<Model> model = make_model(c.model, c.train.micro_batch, false);
  EXPECT_EQ(stage_footprint(c, plan, 0).params, model->num_params());
}

TEST(CostModel, ZeroBytesPerParameterAreThePapers) {
  // f32 AdamW on N = 4 replicas: DDP 16 bytes per parameter; ZeRO-1 4 + 4 + 8/N; ZeRO-2
  // 4 + 12/N; ZeRO-3 16/N, plus the gathered groups.
  Config c = gpt(1, 1);
  c.train.async_checkpoint = false;
  const double N = 4;
  for (int zero = 0; zero <= 3; ++zero) {
    c.parallel.zero = zero;
    const Prediction p = predict(c, plan_job(c, 4), cluster(4));
    const double P = static_cast<double>(p.footprint.params);
    const MemoryPrediction& m = p.memory;
    const double state = m.weights + m.gradients + m.optimizer;
    const double groups = zero == 3 ? 8.0 * static_cast<double>(p.footprint.largest_group) : 0;
    const double expected[] = {16, 8 + 8 / N, 4 + 12 / N, 16 / N};
    EXPECT_NEAR((state - groups) / P, expected[zero], 1e-9) << "ZeRO-" << zero;
  }
}

TEST(CostModel, PipelineBubbleIsTheClosedForm) {
  // 1F1B with p stages of equal cost and m micro-batches idles (p - 1) / (m + p - 1) of the
  // step, communication free: cost the pipeline's hop at zero and compare.
  Config c = gpt(1, 4, 8);
  c.model.n_layer = 8;
  c.parallel.overlap_grad_reduce = false;
  ClusterSpec free = cluster(4);
  free.node_link = {.bandwidth_gbit = 1e12, .latency_us = 0};
  const Prediction p = predict(c, plan_job(c, 4), free);
  const double stages = 4, m = 8;
  const double busy = p.time.compute;
  EXPECT_NEAR(p.time.bubble / (busy + p.time.bubble), (stages - 1) / (m + stages - 1), 1e-6);
}

TEST(CostModel, DilocoSendsWhatDdpSendsOncePerOuterStep) {
  Config c = gpt(1, 1);
  const Prediction ddp = predict(c, plan_job(c, 4), cluster(4));
  c.sync.method = SyncKind::kDiloco;
  c.sync.inner_steps = 16;
  const Prediction diloco = predict(c, plan_job(c, 4), cluster(4));
  // DDP in 1 MiB buckets moves the same bytes as one all-reduce of everything, give or take the
  // ring's rounding of each bucket into chunks.
  EXPECT_NEAR(diloco.dp_bytes * 16 / ddp.dp_bytes, 1.0, 1e-3);
  EXPECT_GT(diloco.tokens_per_s, ddp.tokens_per_s);
}

}  // namespace
}  // namespace brigade
