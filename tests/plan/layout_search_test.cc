// brigade plan's search (plan/layout_search.h): what it enumerates is what a job accepts, what
// does not fit is never ranked first, and a model one process cannot hold is split.
#include "brigade/plan/layout_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "brigade/base/error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

Config gpt() {
  Config c;
  c.model.n_layer = 8;
  c.model.n_head = 8;
  c.model.d_model = 512;
  c.model.seq_len = 128;
  c.train.micro_batch = 4;
  c.train.grad_accum = 2;
  return c;
}

ClusterSpec cluster(int64_t world, double memory_gib) {
  ClusterSpec c;
  c.processes_per_node = world;
  c.devices_per_node = world;
  c.process_overhead_mib = 50;
  c.device = {.peak_flops = 1e11,
              .gemm_flops = 5e10,
              .attention_flops = 3e10,
              .elementwise_gbs = 10,
              .memory_bandwidth_gbs = 10,
              .memory_gib = memory_gib,
              .watts = 5};
  c.node_link = {.bandwidth_gbit = 10, .latency_us = 20};
  return c;
}

TEST(LayoutSearch, EveryRankedLayoutIsAJobThatRuns) {
  const SearchResult r = search_layouts(gpt(), cluster(4, 1.0), {});
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.global_batch, 4 * 2 * 4);  // the config's micro-batch x accumulation x 4 replicas
  EXPECT_GT(r.refused, 0);               // e.g. ZeRO-3 with tp or pp
  for (const Candidate& c : r.ranked) {
    Config copy = c.config;
    EXPECT_NO_THROW(copy.validate()) << c.label();
    const JobPlan plan = plan_job(copy, 4);
    const MeshShape& s = plan.mesh.shape;
    // The same global batch in every layout.
    EXPECT_EQ(copy.train.micro_batch * copy.train.grad_accum * s.dp * s.ep, r.global_batch)
        << c.label();
  }
  // Fastest first among those that fit; the best has no reason to lose.
  EXPECT_TRUE(r.ranked.front().why_not.empty());
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    if (!r.ranked[i].fits) break;
    EXPECT_LE(r.ranked[0].prediction.time.step, r.ranked[i].prediction.time.step * 1.005);
    EXPECT_FALSE(r.ranked[i].why_not.empty());
  }
}

TEST(LayoutSearch, AModelOneProcessCannotHoldIsSplit) {
  // About 25 M parameters: 16 bytes each is 400 MB of state, which 300 MiB per process does not
  // hold whole; ZeRO, tensor or pipeline parallelism over 4 processes does.
  Config c = gpt();
  const ClusterSpec small = cluster(4, 0.3);
  const SearchResult r = search_layouts(c, small, {});
  ASSERT_TRUE(r.ranked.front().fits) << r.ranked.front().why_not;
  const Candidate& best = r.ranked.front();
  const MeshShape& s = best.plan.mesh.shape;
  EXPECT_TRUE(best.config.parallel.zero > 0 || s.tp > 1 || s.pp > 1) << best.label();
  EXPECT_LE(best.prediction.memory.total(), small.memory_bytes_per_process());
  // A plain DDP layout is there, and does not fit.
  bool ddp_seen = false;
  for (const Candidate& k : r.ranked) {
    if (k.plan.mesh.shape.dp == 4 && k.config.parallel.zero == 0) {
      ddp_seen = true;
      EXPECT_FALSE(k.fits) << k.label();
      EXPECT_THAT(k.why_not, HasSubstr("does not fit"));
    }
  }
  EXPECT_TRUE(ddp_seen);
}

TEST(LayoutSearch, AsIsPredictsTheConfigOrRefusesIt) {
  Config c = gpt();
  c.parallel.pp = 2;
  const SearchResult r = search_layouts(c, cluster(4, 1.0), {.as_is = true});
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_EQ(r.ranked.front().plan.mesh.shape.dp, 2);
  c.parallel.pp = 3;  // 3 does not divide 4 processes
  EXPECT_THROW(search_layouts(c, cluster(4, 1.0), {.as_is = true}), ConfigError);
  c.parallel.pp = 1;
  c.model.kind = ModelKind::kMlp;
  try {
    search_layouts(c, cluster(4, 1.0), {});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.kind = \"mlp\": brigade plan predicts GPT models"));
  }
}

TEST(LayoutSearch, SlowLinksFavourDilocoAmongReplicas) {
  // Two nodes over 100 Mbit/s with 50 ms round trips. Replicas on the two nodes: DDP's
  // every-step average of 100 MB is exposed, DiLoCo's comes once per 16 steps. (Two pipeline
  // stages, one per node, send only activations, a few MB per step: the search is right to
  // rank them first.)
  ClusterSpec two = cluster(2, 4.0);
  two.nodes = 2;
  two.processes_per_node = 1;
  two.devices_per_node = 1;
  two.cluster_link = {.bandwidth_gbit = 0.1, .latency_us = 50'000};
  const SearchResult r = search_layouts(gpt(), two, {.diloco_inner_steps = {16}});
  const Candidate* replicas = nullptr;
  const Candidate* ddp = nullptr;
  for (const Candidate& c : r.ranked) {
    if (c.plan.mesh.shape.dp != 2) continue;
    if (replicas == nullptr) replicas = &c;
    if (ddp == nullptr && c.config.sync.method == SyncKind::kDdp) ddp = &c;
  }
  ASSERT_NE(replicas, nullptr);
  ASSERT_NE(ddp, nullptr);
  EXPECT_EQ(replicas->config.sync.method, SyncKind::kDiloco) << replicas->label();
  EXPECT_TRUE(replicas->prediction.dp_crosses_nodes);
  EXPECT_THAT(ddp->why_not, HasSubstr("exposed dp exchange"));
  EXPECT_GT(ddp->prediction.time.dp_exposed, 10 * replicas->prediction.time.dp_exposed);
}

}  // namespace
}  // namespace brigade
