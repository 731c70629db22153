// DiLoCo with a compressed pseudo-gradient (sync/lowcomm/diloco.h, OuterWire::kDctTopk) across
// real processes:
//   - with k = the whole chunk and f32 values nothing is dropped, so every outer step equals
//     plain DiLoCo's (f32 all-reduce) up to the DCT's rounding, and the residual stays ~0;
//   - with k = 4 and 1-bit values, every rank's theta_global and residual equal a local
//     simulation of the whole group built from the codec and the Nesterov recurrence in double,
//     all ranks hold bitwise the same weights, and the residual is exactly what was not sent:
//     sum of Delta_i over rounds == residual + sum of what replica i's payloads decode to;
//   - the same with the residual decayed by beta = 0.8 each round (SparseLoCo);
//   - the counted bytes equal bytes_per_step() = (W - 1) * payload_bytes() each way.
#include <gtest/gtest.h>

#include <cmath>

#include "brigade/sync/lowcomm/common.h"
#include "brigade/sync/lowcomm/diloco.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::mixed_layout;
using testutil::replica_grad;

// Replica r's local weights after its inner steps of round `round` from `start`.
std::vector<float> drifted(const std::vector<float>& start, int r, int round) {
  std::vector<float> local = start;
  for (int h = 0; h < 3; ++h) {
    const std::vector<float> g = replica_grad(static_cast<int64_t>(start.size()), r, round * 3 + h);
    for (size_t i = 0; i < local.size(); ++i) local[i] -= 0.01f * g[i];
  }
  return local;
}

TEST(DilocoDctMp, WholeChunkF32EqualsPlainDiloco) {
  const int W = 3, R = 3;
  testutil::expect_ranks_pass(W, 60s, [&](int rank, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    const std::vector<float> theta0 = testutil::normal_vector(n, 3, "theta");
    const DilocoConfig dct{.wire = OuterWire::kDctTopk,
                           .dct = {.k = 4096, .values = ValueFormat::kF32}};
    DilocoOuter compressed(dct, theta0.data(), 0, n, &l);
    DilocoOuter plain(DilocoConfig{}, theta0.data(), 0, n);
    std::vector<float> a = theta0, b = theta0;
    for (int round = 0; round < R; ++round) {
      a = drifted(a, rank, round);
      b = drifted(b, rank, round);
      compressed.outer_step(a.data(), comm);
      plain.outer_step(b.data(), comm);
      // Rounding: the DCT round trip (~1e-7 relative per value) on Deltas of ~0.03, amplified
      // by the outer step (lr 0.7 (1 + mu)) and carried over rounds.
      ASSERT_LT(testutil::max_abs_diff(a.data(), b.data(), n), 1e-5) << "round " << round;
      ASSERT_LT(
          testutil::max_abs(std::vector<float>(compressed.residual(), compressed.residual() + n)),
          1e-6f);
    }
    EXPECT_TRUE(testutil::identical_across_ranks(comm, a.data(), n));
  });
}

// beta: the residual decay (1 = classic error feedback; SparseLoCo decays it).
void one_bit_topk_case(float beta) {
  const int W = 3, R = 3;
  testutil::expect_ranks_pass(W, 60s, [&](int rank, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    const std::vector<float> theta0 = testutil::normal_vector(n, 4, "theta");
    const DilocoConfig c{.wire = OuterWire::kDctTopk,
                         .dct = {.k = 4, .values = ValueFormat::kSign},
                         .residual_decay = beta};
    DilocoOuter outer(c, theta0.data(), 0, n, &l);
    // The simulation: one codec and residual per replica, the mean of the decoded payloads,
    // the Nesterov recurrence in double.
    std::vector<DctTopkCodec> codecs;
    for (int r = 0; r < W; ++r) {
      codecs.emplace_back(DctTopkConfig{.k = 4, .values = ValueFormat::kSign, .chunk_scales = true},
                          l, 0, n, "sim");
    }
    std::vector<std::vector<float>> e(W, std::vector<float>(n, 0.0f));
    std::vector<double> ref(theta0.begin(), theta0.end()), v(n, 0.0), sent_mine(n, 0.0),
        delta_mine(n, 0.0);
    std::vector<uint8_t> payload(codecs[0].size_bytes());
    std::vector<float> theta = theta0;
    for (int round = 0; round < R; ++round) {
      const std::vector<float> start = theta;
      std::vector<double> mean(n, 0.0);
      for (int r = 0; r < W; ++r) {
        const std::vector<float> local = drifted(start, r, round);
        std::vector<float> decoded(n, 0.0f);
        for (int64_t i = 0; i < n; ++i) e[r][i] = beta * e[r][i] + (start[i] - local[i]);
        codecs[r].encode(e[r].data(), payload.data(), DctTopkCodec::Residual::kDecoded);
        codecs[r].decode_add(payload.data(), 1.0f, decoded.data());
        for (int64_t i = 0; i < n; ++i) mean[i] += double{decoded[i]} / W;
        if (r == rank) {
          for (int64_t i = 0; i < n; ++i) {
            sent_mine[i] = beta * sent_mine[i] + decoded[i];
            delta_mine[i] = beta * delta_mine[i] + (double{start[i]} - local[i]);
          }
          theta = local;
        }
      }
      const Traffic t = testutil::traffic_of(comm, [&] { outer.outer_step(theta.data(), comm); });
      EXPECT_EQ(t.sent, (W - 1) * outer.payload_bytes());
      EXPECT_EQ(t.sent, outer.bytes_per_step(W, rank).sent);
      EXPECT_EQ(t.received, outer.bytes_per_step(W, rank).received);
      for (int64_t i = 0; i < n; ++i) {
        v[i] = 0.9 * v[i] + mean[i];
        ref[i] -= 0.7 * (mean[i] + 0.9 * v[i]);
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(theta[i], ref[i], 1e-5) << "round " << round;
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(outer.residual()[i], e[rank][i], 1e-6) << i;
      // Nothing lost but what decays: the decayed sum of the Deltas so far == residual + the
      // decayed sum of everything sent.
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(delta_mine[i], outer.residual()[i] + sent_mine[i], 1e-5) << i;
      }
    }
    // 1 bit per value: a payload is much smaller than the f32 Delta.
    EXPECT_EQ(outer.payload_bytes(), codecs[0].size_bytes());
    EXPECT_LT(outer.payload_bytes() * 10, 4 * n);
    EXPECT_EQ(outer.local_state_tensors().size(), 1u);
    EXPECT_EQ(outer.local_state_tensors()[0].name, "diloco.residual");
    EXPECT_TRUE(testutil::identical_across_ranks(comm, theta.data(), n));
  });
}

TEST(DilocoDctMp, OneBitTopkEqualsLocalSimulationAndCountsItsBytes) {
  one_bit_topk_case(1.0f);
}

TEST(DilocoDctMp, DecayedResidualEqualsLocalSimulation) {
  one_bit_topk_case(0.8f);
}

}  // namespace
}  // namespace brigade
