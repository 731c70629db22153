// The derived round counts (wire_traffic.h) against an independent timing model: each Gloo
// loop is replayed step by step on every rank with zero transfer time and Gloo's tcp
// handshake (a message leaves only after its receiver's NOTIFY_RECV_READY arrived, one-way
// delay L = RTT / 2 each), and the time until the last rank finishes, in RTTs, must equal the
// closed form (or stay within the stated margin under it). CommStats is
// checked to accumulate what its callers report.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "brigade/comm/comm_stats.h"
#include "brigade/comm/wire_traffic.h"

namespace brigade {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr double kL = 0.5;  // one-way delay; RTT = 1

// A message from a sender that posts its send at `send_t` to a receiver that posted its recv at
// `recv_t`: the data leaves once both the send is posted and the notification has arrived.
double arrival(double send_t, double recv_t) {
  return std::max(send_t, recv_t + kL) + kL;
}

// Replays gloo::allreduce's ring (reduce-scatter loop, then all-gather loop) on all ranks.
// Returns the finishing time of the slowest rank. Mirrors the loop structure of
// gloo/allreduce.cc ring(): iterations 0 .. (numSegments - S) + 1; message i is posted at
// iteration i and waited at iteration i + 2; empty segments are neither sent nor waited.
double simulate_ring_allreduce(int64_t total, int64_t elem, int world, int64_t max_seg_bytes) {
  const int64_t max_seg = elem * std::max<int64_t>(1, max_seg_bytes / elem);
  int64_t num_segments = std::max<int64_t>((total + max_seg - 1) / max_seg, 2 * world);
  num_segments = (num_segments + world - 1) / world * world;
  const int64_t per_rank = num_segments / world;
  const int64_t seg = ((total + num_segments - 1) / num_segments + elem - 1) / elem * elem;
  const int64_t messages = num_segments - per_rank;
  auto length = [&](int64_t index) {
    return std::min(seg, total - (index % num_segments) * seg);  // may be <= 0
  };
  std::vector<double> now(world, 0.0);
  for (int phase = 0; phase < 2; ++phase) {
    // Segment rank r sends at iteration i (to r-1); r receives from r+1 what r+1 sends.
    auto send_index = [&](int r, int64_t i) { return (phase == 0 ? (r + 1) : r) * per_rank + i; };
    std::vector<std::vector<double>> post(world, std::vector<double>(messages, 0.0));
    std::vector<double> t = now;
    for (int64_t i = 0; i < messages + 2; ++i) {
      std::vector<double> next = t;
      for (int r = 0; r < world; ++r) {
        if (i >= 2) {
          const int64_t m = i - 2;
          const int from = (r + 1) % world;  // whose send r receives
          if (length(send_index(from, m)) > 0) {
            next[r] = std::max(next[r], arrival(post[from][m], post[r][m]));
          }
          const int to = (r + world - 1) % world;
          if (length(send_index(r, m)) > 0) {
            // waitSend: the data has left once the receiver's notification arrived.
            next[r] = std::max(next[r], std::max(post[r][m], post[to][m] + kL));
          }
        }
      }
      for (int r = 0; r < world; ++r) {
        if (i < messages) post[r][i] = next[r];
      }
      t = next;
    }
    now = t;
  }
  return *std::max_element(now.begin(), now.end());
}

// gloo::allgatherv: N-1 steps, each posted after the previous one completed.
double simulate_allgatherv(int world) {
  double t = 0;  // symmetric: every rank posts at the same time
  for (int step = 0; step < world - 1; ++step) t = arrival(t, t);
  return t;
}

// gloo::barrier: for d = 1, 2, 4, ... < N a recv and a send posted together, both waited.
double simulate_barrier(int world) {
  double t = 0;
  for (int d = 1; d < world; d <<= 1) t = arrival(t, t);
  return t;
}

// gloo::broadcast from root 0: receivers post their recv at time 0 (earlier steps skip them);
// a rank forwards at step i once it has received.
double simulate_broadcast(int world) {
  std::vector<double> has(world, -1.0);
  has[0] = 0;
  int dim = 0;
  while ((1 << dim) < world) ++dim;
  for (int i = 0; i < dim; ++i) {
    // Step i: virtual ranks below 2^i send to v + 2^i.
    for (int v = 0; v < (1 << i) && v + (1 << i) < world; ++v) {
      has[v + (1 << i)] = arrival(has[v], 0.0);
    }
  }
  return *std::max_element(has.begin(), has.end());
}

TEST(WireRoundsTest, RingAllReduceMatchesTheTimingModel) {
  // From 2N equal segments (S = 2) to many 1 MiB segments per chunk (S > 2), and small max
  // segments to reach large S cheaply. With an odd number of messages per phase the last one
  // travels alone and the next phase starts half a round early: the closed form rounds each
  // phase up, so it may exceed the model by half a round, never more.
  for (int world = 2; world <= 8; ++world) {
    for (int64_t n : {int64_t{2} * world * 16, int64_t{1000}, int64_t{262147},
                      (int64_t{3} << 20) + 5, (int64_t{6} << 20) + 1}) {
      const int64_t total = 4 * n;
      const double model = simulate_ring_allreduce(total, 4, world, kMiB);
      const double closed = static_cast<double>(ring_allreduce_rounds(total, 4, world, kMiB));
      EXPECT_LE(model, closed) << "N " << world << " n " << n;
      EXPECT_GE(model, closed - 0.5) << "N " << world << " n " << n;
      if (total <= 2 * world * kMiB) {
        EXPECT_DOUBLE_EQ(model, closed) << "N " << world;
      }
    }
    for (int64_t max_seg : {64, 100, 4096}) {
      const int64_t total = 4 * 10007;
      const double model = simulate_ring_allreduce(total, 4, world, max_seg);
      const double closed = static_cast<double>(ring_allreduce_rounds(total, 4, world, max_seg));
      EXPECT_LE(model, closed) << "N " << world << " max segment " << max_seg;
      EXPECT_GE(model, closed - 0.5) << "N " << world << " max segment " << max_seg;
    }
  }
}

TEST(WireRoundsTest, RingAllReduceSmallPayloadCostsTwoNMinusOne) {
  // Under 2N x 1 MiB the ring has S = 2 segments per chunk: the textbook 2(N-1) rounds.
  for (int world = 2; world <= 9; ++world) {
    EXPECT_EQ(ring_allreduce_rounds(4 * 4096, 4, world, kMiB), 2 * (world - 1)) << world;
  }
  // A tail of empty segments sends nothing: the model is then at most the closed form.
  for (int world = 2; world <= 8; ++world) {
    for (int64_t n : {1, 2, 3, 5, 7}) {
      EXPECT_LE(simulate_ring_allreduce(4 * n, 4, world, kMiB),
                static_cast<double>(ring_allreduce_rounds(4 * n, 4, world, kMiB)));
    }
  }
  EXPECT_EQ(ring_allreduce_rounds(0, 4, 4, kMiB), 0);
  EXPECT_EQ(ring_allreduce_rounds(4 * 100, 4, 1, kMiB), 0);
  // 12 MiB over 2 ranks: 12 segments, S = 6, 6 messages per phase, 3 rounds each.
  EXPECT_EQ(ring_allreduce_rounds(12 * kMiB, 4, 2, kMiB), 6);
}

TEST(WireRoundsTest, OtherCollectivesMatchTheTimingModel) {
  for (int world = 1; world <= 17; ++world) {
    EXPECT_DOUBLE_EQ(simulate_allgatherv(world), static_cast<double>(ring_allgather_rounds(world)));
    EXPECT_DOUBLE_EQ(simulate_barrier(world), static_cast<double>(barrier_rounds(world)));
    EXPECT_EQ(barrier_traffic(world).rounds, barrier_rounds(world));
    EXPECT_EQ(pairwise_alltoall_rounds(world), world > 1 ? 1 : 0);
    // Broadcast: the closed form counts every hop as a round trip; only the first is one.
    const double model = simulate_broadcast(world);
    EXPECT_LE(model, static_cast<double>(binomial_broadcast_rounds(world))) << world;
    EXPECT_GE(model, static_cast<double>(binomial_broadcast_rounds(world)) / 2) << world;
  }
}

TEST(WireRoundsTest, TrafficFunctionsCarryTheirRounds) {
  const std::vector<int64_t> blocks = {8, 8, 8, 8};
  EXPECT_EQ(ring_allgatherv_traffic(blocks, 1).rounds, 3);
  EXPECT_EQ(pairwise_alltoallv_traffic(blocks, blocks, 2).rounds, 1);
  EXPECT_EQ(binomial_broadcast_traffic(100, 5, 3, 0).rounds, 3);
  EXPECT_EQ(ring_allreduce_traffic(4 * 1000, 4, 3, 0, kMiB).rounds, 4);
  EXPECT_EQ(send_traffic(10).rounds, 1);
  EXPECT_EQ(recv_traffic(10).rounds, 1);
}

TEST(CommStatsRoundsTest, RecordAccumulatesRoundsPerKindAndInTotal) {
  CommStats stats;
  stats.record(OpKind::kAllReduce, 100, 100, 2);
  stats.record(OpKind::kAllReduce, 50, 50, 2);
  stats.record(OpKind::kBarrier, 0, 0, 3);
  stats.record(OpKind::kSend, 7, 0);  // a caller that does not know its rounds
  EXPECT_EQ(stats.get(OpKind::kAllReduce).rounds, 4);
  EXPECT_EQ(stats.get(OpKind::kAllReduce).bytes_sent, 150);
  EXPECT_EQ(stats.get(OpKind::kBarrier).rounds, 3);
  EXPECT_EQ(stats.get(OpKind::kSend).rounds, 0);
  EXPECT_EQ(stats.total().rounds, 7);
  EXPECT_NE(stats.summary().find("all_reduce: 2 calls, 4 rounds, sent"), std::string::npos)
      << stats.summary();
  stats.reset();
  EXPECT_EQ(stats.total().rounds, 0);
  EXPECT_EQ(stats.total().calls, 0);
}

}  // namespace
}  // namespace brigade
