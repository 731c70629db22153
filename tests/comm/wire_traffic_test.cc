// The derived byte formulas against closed forms: per rank where the algorithm is symmetric,
// and summed over ranks (every byte sent is received once) for any size. The link to what Gloo
// really puts on the wire is checked by wire_bytes_mp_test.cc with the kernel's TCP counters.
#include "brigade/comm/wire_traffic.h"

#include <gtest/gtest.h>

#include <vector>

namespace brigade {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(WireTrafficTest, RingAllReduceEqualChunksIsTwoNMinusOneOverN) {
  for (int world = 2; world <= 9; ++world) {
    // n = 2N*m elements gives 2N equal segments (T below the 1 MiB segment cap).
    for (int64_t m : {1, 5, 100}) {
      const int64_t n = 2 * world * m;
      const int64_t total = 4 * n;
      for (int r = 0; r < world; ++r) {
        Traffic t = ring_allreduce_traffic(total, 4, world, r, kMiB);
        EXPECT_EQ(t.sent, 2 * (world - 1) * total / world) << "N " << world << " n " << n;
        EXPECT_EQ(t.received, 2 * (world - 1) * total / world);
      }
    }
  }
}

TEST(WireTrafficTest, RingAllReduceAnySizeSumsToTwoNMinusOneTimesT) {
  const std::vector<int64_t> sizes = {
      1, 2, 3, 7, 13, 1000, 1001, 262147, (int64_t{1} << 20) + 3, (int64_t{1} << 22) + 3};
  for (int world = 2; world <= 9; ++world) {
    for (int64_t n : sizes) {
      for (int64_t elem : {2, 4}) {
        const int64_t total = n * elem;
        int64_t sent = 0, received = 0;
        for (int r = 0; r < world; ++r) {
          Traffic t = ring_allreduce_traffic(total, elem, world, r, kMiB);
          EXPECT_LE(t.sent, 2 * total);
          EXPECT_GE(t.sent, 0);
          sent += t.sent;
          received += t.received;
        }
        EXPECT_EQ(sent, 2 * (world - 1) * total) << "N " << world << " n " << n;
        EXPECT_EQ(received, 2 * (world - 1) * total) << "N " << world << " n " << n;
      }
    }
  }
}

TEST(WireTrafficTest, RingAllReduceSmallUnevenCaseByHand) {
  // N = 3, n = 7 floats (T = 28): 6 segments of 8 bytes hold 8, 8, 8, 4, 0, 0 bytes, so
  // chunks (2 segments each) hold 16, 12, 0 bytes. sent = 2T - c[r] - c[r-1],
  // received = 2T - c[r] - c[r+1].
  const int64_t c[3] = {16, 12, 0};
  for (int r = 0; r < 3; ++r) {
    Traffic t = ring_allreduce_traffic(28, 4, 3, r, kMiB);
    EXPECT_EQ(t.sent, 56 - c[r] - c[(r + 2) % 3]) << r;
    EXPECT_EQ(t.received, 56 - c[r] - c[(r + 1) % 3]) << r;
  }
}

TEST(WireTrafficTest, NothingMovesForOneRankOrNoData) {
  EXPECT_EQ(ring_allreduce_traffic(4000, 4, 1, 0, kMiB).sent, 0);
  EXPECT_EQ(ring_allreduce_traffic(0, 4, 4, 2, kMiB).received, 0);
  EXPECT_EQ(binomial_broadcast_traffic(100, 1, 0, 0).sent, 0);
  EXPECT_EQ(ring_allgatherv_traffic(std::vector<int64_t>{5}, 0).sent, 0);
}

TEST(WireTrafficTest, RingAllGatherV) {
  const std::vector<int64_t> bytes = {10, 0, 7, 3};
  for (int r = 0; r < 4; ++r) {
    Traffic t = ring_allgatherv_traffic(bytes, r);
    EXPECT_EQ(t.sent, 20 - bytes[(r + 1) % 4]);
    EXPECT_EQ(t.received, 20 - bytes[r]);
  }
  const std::vector<int64_t> even(5, 12);
  EXPECT_EQ(ring_allgatherv_traffic(even, 3).sent, 4 * 12);
  EXPECT_EQ(ring_allgatherv_traffic(even, 3).received, 4 * 12);
}

TEST(WireTrafficTest, PairwiseAllToAllV) {
  const std::vector<int64_t> send = {1, 2, 3}, recv = {4, 5, 6};
  Traffic t = pairwise_alltoallv_traffic(send, recv, 1);
  EXPECT_EQ(t.sent, 1 + 3);
  EXPECT_EQ(t.received, 4 + 6);
}

TEST(WireTrafficTest, BinomialBroadcastMovesNMinusOneCopies) {
  const int64_t b = 1000;
  for (int world = 1; world <= 17; ++world) {
    int log2ceil = 0;
    while ((1 << log2ceil) < world) ++log2ceil;
    for (int root = 0; root < world; ++root) {
      int64_t sent = 0, received = 0;
      for (int r = 0; r < world; ++r) {
        Traffic t = binomial_broadcast_traffic(b, world, r, root);
        EXPECT_EQ(t.received, r == root ? 0 : b) << "N " << world << " root " << root;
        sent += t.sent;
        received += t.received;
      }
      EXPECT_EQ(sent, (world - 1) * b);
      EXPECT_EQ(received, (world - 1) * b);
      // The root sends in every one of the ceil(log2 N) rounds of the tree.
      EXPECT_EQ(binomial_broadcast_traffic(b, world, root, root).sent, log2ceil * b);
    }
  }
}

}  // namespace
}  // namespace brigade
