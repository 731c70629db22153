// The error-fed 1-bit all-reduce (sync/lowcomm/sign_allreduce.h) across real processes:
//   - every rank's result equals a naive simulation of the whole group: every replica's worker
//     residual, then the owner stage applied block by block over the whole range (the sharding
//     only decides who computes which block, so the reference does not depend on it);
//   - nothing is lost: the sum of all results + the mean of the worker residuals + the owners'
//     residuals equals the sum of the true means, over several calls;
//   - all ranks decode bitwise the same values, and the counted bytes equal bytes_per_call():
//     ~16x less than an f32 ring all-reduce of the same values at blocks of 32;
//   - values that are already one magnitude per block with the same signs everywhere come
//     through exactly, with zero residuals.
// DiLoCo over it: diloco_wires_mp_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "brigade/sync/lowcomm/payload.h"
#include "brigade/sync/lowcomm/sign_allreduce.h"
#include "lowcomm/lowcomm_mp_util.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::mixed_layout;
using testutil::replica_grad;

constexpr int64_t kBlock = 32;

// Q(v) block by block over the whole layout, the naive way: blocks of <= kBlock values inside
// each tensor, scale = mean |v|, +-scale by sign (0 counts as +). v -= Q(v); returns Q(v).
std::vector<float> naive_quantize(const ParamLayout& l, std::vector<float>& v) {
  std::vector<float> q(v.size());
  for (const ParamSpec& s : l.specs()) {
    for (int64_t b = s.offset; b < s.offset + s.numel; b += kBlock) {
      const int64_t e = std::min(s.offset + s.numel, b + kBlock);
      double l1 = 0.0;
      for (int64_t i = b; i < e; ++i) l1 += std::fabs(v[i]);
      const float scale = static_cast<float>(l1 / static_cast<double>(e - b));
      for (int64_t i = b; i < e; ++i) {
        q[i] = v[i] < 0.0f ? -scale : scale;
        v[i] -= q[i];
      }
    }
  }
  return q;
}

std::vector<float> gathered(Communicator& comm, const float* v, int64_t n) {
  std::vector<float> all(comm.size() * n);
  comm.all_gather(v, all.data(), n);
  return all;
}

TEST(SignAllReduceMp, EqualsNaiveSimulationLosesNothingAndCountsItsBytes) {
  const int W = 4, R = 4;
  testutil::expect_ranks_pass(W, 60s, [&](int rank, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    SignAllReduce ar(l, 0, n, kBlock);
    std::vector<std::vector<float>> worker(W, std::vector<float>(n, 0.0f));
    std::vector<float> owner(n, 0.0f);
    std::vector<double> sum_out(n, 0.0), sum_true(n, 0.0);
    for (int t = 0; t < R; ++t) {
      // The reference: every replica's worker stage, the mean of their signs in rank order,
      // the owner stage.
      std::vector<float> mean(n, 0.0f);
      for (int r = 0; r < W; ++r) {
        const std::vector<float> x = replica_grad(n, r, t);
        for (int64_t i = 0; i < n; ++i) {
          worker[r][i] += x[i];
          sum_true[i] += double{x[i]} / W;
        }
        const std::vector<float> c = naive_quantize(l, worker[r]);
        for (int64_t i = 0; i < n; ++i) mean[i] += c[i];
      }
      for (int64_t i = 0; i < n; ++i) owner[i] += mean[i] * (1.0f / W);
      const std::vector<float> ref = naive_quantize(l, owner);

      std::vector<float> x = replica_grad(n, rank, t);
      const Traffic bytes = testutil::traffic_of(comm, [&] { ar.all_reduce_mean(x.data(), comm); });
      EXPECT_EQ(bytes.sent, ar.bytes_per_call(W, rank).sent);
      EXPECT_EQ(bytes.received, ar.bytes_per_call(W, rank).received);
      // f32 ring all-reduce: 2 (W - 1) / W * 4n bytes sent; here a sign and, with blocks of
      // 32, a 32-bit scale per 32 values: 2 bits per value, ~16x less.
      EXPECT_LT(bytes.sent * 14, 2 * (W - 1) * 4 * n / W);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], ref[i], 1e-6) << "call " << t << " " << i;
      for (int64_t i = 0; i < n; ++i) sum_out[i] += x[i];
      EXPECT_TRUE(testutil::identical_across_ranks(comm, x.data(), n));
    }
    // Nothing lost: outputs + mean worker residual + owner residuals == the true means.
    const std::vector<float> residuals = gathered(comm, ar.residual(), n);
    const std::vector<StateView> state = ar.state_tensors("t");
    ASSERT_EQ(state.size(), 2u);
    EXPECT_EQ(state[0].name, "t.residual");
    EXPECT_EQ(state[1].name, "t.owner_residual");
    const std::vector<float> owners = gathered(comm, state[1].data, n);
    for (int64_t i = 0; i < n; ++i) {
      double kept = 0.0;
      for (int r = 0; r < W; ++r) kept += double{residuals[r * n + i]} / W + owners[r * n + i];
      ASSERT_NEAR(sum_out[i] + kept, sum_true[i], 1e-4) << i;
    }
  });
}

TEST(SignAllReduceMp, OneMagnitudePerBlockComesThroughExactly) {
  const int W = 3;
  testutil::expect_ranks_pass(W, 60s, [&](int, Communicator& comm) {
    const ParamLayout l = mixed_layout();
    const int64_t n = l.total();
    SignAllReduce ar(l, 0, n, kBlock);
    // Block b of every tensor holds +-(b + 1) / 8, signs from a fixed pattern.
    std::vector<float> want(n);
    for (const ParamSpec& s : l.specs()) {
      for (int64_t i = 0; i < s.numel; ++i) {
        const float mag = static_cast<float>(i / kBlock + 1) / 8.0f;
        want[s.offset + i] = (i * 7 + s.offset) % 3 == 0 ? -mag : mag;
      }
    }
    std::vector<float> x = want;
    ar.all_reduce_mean(x.data(), comm);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], want[i]) << i;
    for (const StateView& v : ar.state_tensors("t")) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v.data[i], 0.0f) << v.name << " " << i;
    }
  });
}

// The one-level form (DiLoCo's quorum exchange through the store): a message decodes to what
// encode() says it sent, the residual keeps the rest, and a message with a bad scale, bad
// padding or the wrong length is refused naming the sender.
TEST(SignAllReduce, OneLevelMessageRoundTripsAndBadOnesAreRefused) {
  const ParamLayout l = mixed_layout();
  const int64_t n = l.total();
  SignAllReduce ar(l, 0, n, kBlock);
  const std::vector<float> x = replica_grad(n, 0, 0);
  std::vector<uint8_t> msg(ar.one_shard_bytes());
  std::vector<float> sent(n), decoded(n, 0.0f);
  ar.encode(x.data(), msg.data(), sent.data());
  ar.validate(msg.data(), static_cast<int64_t>(msg.size()), 2);
  ar.decode_add(msg.data(), 1.0f, decoded.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(decoded[i], sent[i]) << i;
    ASSERT_NEAR(ar.residual()[i] + sent[i], x[i], 1e-6) << i;
  }
  // Scales then signs: 4 bytes per block plus n / 8.
  EXPECT_EQ(ar.one_shard_bytes(), 4 * ar.num_blocks() + (n + 7) / 8);
  ar.return_unsent(msg.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(ar.residual()[i], x[i], 1e-6) << i;

  auto error_of = [&](std::vector<uint8_t> m) -> std::string {
    try {
      ar.validate(m.data(), static_cast<int64_t>(m.size()), 2);
    } catch (const PayloadError& e) {
      return e.what();
    }
    return "";
  };
  std::vector<uint8_t> bad = msg;
  const float nan = std::nanf("");
  std::memcpy(bad.data() + 4, &nan, 4);
  EXPECT_NE(error_of(bad).find("from rank 2: block 1 has scale nan"), std::string::npos)
      << error_of(bad);
  bad = msg;
  bad.pop_back();
  EXPECT_NE(error_of(bad).find("length"), std::string::npos) << error_of(bad);
}

}  // namespace
}  // namespace brigade
