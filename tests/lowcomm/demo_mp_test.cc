// DeMo across real processes (Gloo over loopback, 2-3 ranks, a different gradient per rank):
// with k = the whole chunk and beta = 0 one step is sign-SGD on the mean gradient and leaves
// delta at 0; in general every rank ends bitwise equal to a local simulation of the whole
// group; the bytes counted by the Communicator equal bytes_per_step() and the group totals
// W (W - 1) * payload_bytes().
#include <gtest/gtest.h>

#include <cmath>

#include "brigade/sync/lowcomm/demo.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::mixed_layout;
using testutil::replica_grad;

TEST(DemoMp, WholeChunkBetaZeroIsSignSgdOnTheMeanGradient) {
  for (int W : {2, 3}) {
    testutil::TempDir dir;
    auto result = testutil::run_ranks(W, 30s, [&](int rank) {
      auto comm = testutil::make_file_comm(dir.path(), rank, W);
      const ParamLayout layout = mixed_layout();
      const int64_t n = layout.total();
      const DemoConfig c{.beta = 0.0f, .k = 4096, .weight_decay = 0.1f};
      Demo demo(c, layout, 0, n);
      std::vector<float> p = testutil::normal_vector(n, 1, "p0");
      const std::vector<float> p0 = p;
      // Rank 0 carries a large +-10 W pattern so the mean's sign is unambiguous.
      std::vector<std::vector<float>> g(W);
      for (int r = 0; r < W; ++r) {
        g[r] = replica_grad(n, r, 0);
        if (r == 0)
          for (int64_t i = 0; i < n; ++i) g[r][i] += (i % 3 == 0 ? -10.0f : 10.0f) * W;
      }
      const float lr = 0.05f;
      const Traffic t =
          testutil::traffic_of(*comm, [&] { demo.step(p.data(), g[rank].data(), lr, *comm); });
      for (const ParamSpec& s : layout.specs()) {
        const float keep = s.weight_decay ? 1.0f - lr * c.weight_decay : 1.0f;
        for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
          double mean = 0.0;
          for (int r = 0; r < W; ++r) mean += g[r][i];
          ASSERT_NEAR(p[i], p0[i] * keep - lr * (mean > 0 ? 1.0f : -1.0f), 1e-6f) << s.name;
        }
      }
      // delta = lr g - IDCT(DCT(lr g)): only the f32 round-trip error of the transform.
      const float* delta = demo.state_tensors()[0].data;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(delta[i]), 4e-6f * lr * testutil::max_abs(g[rank])) << i;
      }
      EXPECT_EQ(t.sent, demo.bytes_per_step(W, rank).sent);
      EXPECT_EQ(t.received, demo.bytes_per_step(W, rank).received);
      EXPECT_EQ(t.sent, (W - 1) * demo.payload_bytes());
      EXPECT_TRUE(testutil::identical_across_ranks(*comm, p.data(), n));
    });
    EXPECT_TRUE(testutil::AllRanksOk(result)) << "W " << W;
  }
}

TEST(DemoMp, EveryRankEqualsALocalSimulationOfTheGroup) {
  const int W = 3;
  for (ValueFormat f : {ValueFormat::kSign, ValueFormat::kBF16}) {
    testutil::TempDir dir;
    auto result = testutil::run_ranks(W, 30s, [&](int rank) {
      auto comm = testutil::make_file_comm(dir.path(), rank, W);
      ParamLayout layout = mixed_layout();
      layout.add({.name = "emb", .shape = {50, 64}});  // chunks of 50x64 = 3200 (u16 indices)
      const int64_t n = layout.total();
      const DemoConfig c{.beta = 0.9f, .k = 4, .values = f, .weight_decay = 0.1f};
      Demo demo(c, layout, 0, n);
      std::vector<Demo> sim;
      for (int r = 0; r < W; ++r) sim.emplace_back(c, layout, 0, n);
      std::vector<float> p = testutil::normal_vector(n, 2, "p0");
      std::vector<std::vector<float>> sim_p(W, p);
      const int64_t bytes = demo.payload_bytes();
      std::vector<uint8_t> gathered(W * bytes);
      int64_t sent_total = 0;
      for (int step = 0; step < 3; ++step) {
        const float lr = 0.01f * (step + 1);
        const Traffic t = testutil::traffic_of(
            *comm, [&] { demo.step(p.data(), replica_grad(n, rank, step).data(), lr, *comm); });
        EXPECT_EQ(t.sent, demo.bytes_per_step(W, rank).sent) << "step " << step;
        EXPECT_EQ(t.received, demo.bytes_per_step(W, rank).received) << "step " << step;
        sent_total += t.sent;
        for (int r = 0; r < W; ++r) {
          sim[r].compress(replica_grad(n, r, step).data(), lr, gathered.data() + r * bytes);
        }
        for (int r = 0; r < W; ++r) sim[r].apply(gathered.data(), W, sim_p[r].data(), lr);
        ASSERT_EQ(0, std::memcmp(p.data(), sim_p[rank].data(), sizeof(float) * n))
            << value_format_name(f) << " step " << step;
        ASSERT_EQ(0, std::memcmp(demo.state_tensors()[0].data, sim[rank].state_tensors()[0].data,
                                 sizeof(float) * n));
      }
      EXPECT_TRUE(testutil::identical_across_ranks(*comm, p.data(), n));
      // Every byte sent is received once: the group sends W (W - 1) payloads per step.
      EXPECT_EQ(testutil::sum_across_ranks(*comm, sent_total), 3 * W * (W - 1) * bytes);
    });
    EXPECT_TRUE(testutil::AllRanksOk(result)) << value_format_name(f);
  }
}

}  // namespace
}  // namespace brigade
