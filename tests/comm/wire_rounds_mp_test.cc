// The rounds the Gloo communicator records per operation equal the derived formulas
// (wire_traffic.h; the formulas themselves are checked against a timing model in
// wire_rounds_test.cc): every operation kind, 3 and 4 ranks, and an all-reduce large enough to
// have more than two segments per chunk.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kMiB = 1 << 20;

// Runs fn (one operation of `kind`) and returns the rounds it added.
template <typename Fn>
int64_t rounds_of(Communicator& comm, OpKind kind, Fn&& fn) {
  const OpCounters before = comm.stats().get(kind);
  fn();
  const OpCounters after = comm.stats().get(kind);
  EXPECT_EQ(after.calls, before.calls + 1) << op_kind_name(kind);
  return after.rounds - before.rounds;
}

int64_t ceil_log2(int n) {
  int64_t k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

void check_all_ops(Communicator& comm) {
  const int N = comm.size(), r = comm.rank();
  std::vector<float> small(1000, 1.f);
  EXPECT_EQ(rounds_of(comm, OpKind::kAllReduce,
                      [&] { comm.all_reduce(small.data(), small.size(), ReduceOp::kSum); }),
            2 * (N - 1));
  // 12 MiB + 20 bytes: numSegments = roundUp(13, N), S = numSegments / N segments per chunk.
  std::vector<float> big(3 * (1 << 20) + 5, 1.f);
  const int64_t segments = (13 + N - 1) / N * N;
  const int64_t per_phase = (N - 1) * (segments / N);
  EXPECT_EQ(rounds_of(comm, OpKind::kAllReduce,
                      [&] { comm.all_reduce(big.data(), big.size(), ReduceOp::kSum); }),
            2 * ((per_phase + 1) / 2));
  EXPECT_EQ(
      rounds_of(
          comm, OpKind::kAllReduce,
          [&] { comm.all_reduce(small.data(), small.size(), ReduceOp::kAvg, WireDtype::kBF16); }),
      1 + (N - 1));
  std::vector<float> rs_in(N * 64, 1.f), rs_out(64);
  EXPECT_EQ(
      rounds_of(comm, OpKind::kReduceScatter,
                [&] { comm.reduce_scatter(rs_in.data(), rs_out.data(), 64, ReduceOp::kSum); }),
      1);
  std::vector<float> ag_in(64, float(r)), ag_out(N * 64);
  EXPECT_EQ(rounds_of(comm, OpKind::kAllGather,
                      [&] { comm.all_gather(ag_in.data(), ag_out.data(), 64); }),
            N - 1);
  std::vector<int64_t> counts(N);
  for (int p = 0; p < N; ++p) counts[p] = 10 + p;
  std::vector<float> agv_in(counts[r], 1.f), agv_out(10 * N + N * (N - 1) / 2);
  EXPECT_EQ(rounds_of(comm, OpKind::kAllGatherV,
                      [&] { comm.all_gather_v(agv_in.data(), agv_out.data(), counts); }),
            N - 1);
  EXPECT_EQ(rounds_of(comm, OpKind::kBroadcast, [&] { comm.broadcast(small.data(), 100, 1); }),
            ceil_log2(N));
  std::vector<float> a2a_out(N * 64);
  EXPECT_EQ(rounds_of(comm, OpKind::kAllToAll,
                      [&] { comm.all_to_all(rs_in.data(), a2a_out.data(), 64); }),
            1);
  EXPECT_EQ(rounds_of(comm, OpKind::kBarrier, [&] { comm.barrier(); }), ceil_log2(N));
  // A ring exchange: one send and one recv, one round each.
  std::vector<char> out(256, 'x'), in(256);
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  const OpCounters send_before = comm.stats().get(OpKind::kSend);
  const OpCounters recv_before = comm.stats().get(OpKind::kRecv);
  auto s = comm.send_async(out.data(), out.size(), next, 7);
  auto v = comm.recv_async(in.data(), in.size(), prev, 7);
  s->wait();
  v->wait();
  EXPECT_EQ(comm.stats().get(OpKind::kSend).rounds - send_before.rounds, 1);
  EXPECT_EQ(comm.stats().get(OpKind::kRecv).rounds - recv_before.rounds, 1);
  // The total is the sum over kinds.
  int64_t sum = 0;
  for (int k = 0; k < kNumOpKinds; ++k) sum += comm.stats().get(static_cast<OpKind>(k)).rounds;
  EXPECT_EQ(comm.stats().total().rounds, sum);
}

class WireRoundsMpTest : public ::testing::TestWithParam<int> {};

TEST_P(WireRoundsMpTest, RecordedRoundsEqualTheFormulas) {
  const int world = GetParam();
  testutil::TempDir dir;
  auto result = testutil::run_ranks(world, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, world, 10s);
    check_all_ops(*comm);
    comm->barrier();
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, WireRoundsMpTest, ::testing::Values(3, 4));

}  // namespace
}  // namespace brigade
