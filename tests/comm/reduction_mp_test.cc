// all_reduce (f32 and bf16 wire, sum/avg/max) and reduce_scatter across real processes, for
// world sizes 1-4 (and 8 for all_reduce) x counts 0, 1, 7, 1000, 2^20, against closed-form
// values, with the byte counters checked against the traffic formulas.
//
// Inputs repeat with period 1024 (rank r contributes r + 0.5 * (i % 1024) to element i), so
// every partial sum is exactly representable in f32 and sums can be compared exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "brigade/tensor/bf16.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::measure;
using testutil::TrafficLedger;

float sum_input(int r, int64_t i) {
  return static_cast<float>(r) + 0.5f * static_cast<float>(i % 1024);
}
// Max inputs: the winning rank changes with i.
float max_input(int r, int64_t i) {
  return static_cast<float>((5 * r + i) % 7) + 0.25f * static_cast<float>(i % 512);
}

float expected_sum(int world, int64_t i) {
  return static_cast<float>(world * (world - 1) / 2) + world * 0.5f * static_cast<float>(i % 1024);
}
float expected_max(int world, int64_t i) {
  float m = max_input(0, i);
  for (int r = 1; r < world; ++r) m = std::max(m, max_input(r, i));
  return m;
}

// Ring all-reduce moves 2(N-1)/N * T per rank exactly when T splits into 2N equal segments.
bool ring_is_symmetric(int64_t n, int world) {
  return n % (2 * world) == 0 && 4 * n <= int64_t{2} * world * (1 << 20);
}

void check_all_reduce_f32(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  std::vector<float> v(n);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    for (int64_t i = 0; i < n; ++i) v[i] = op == ReduceOp::kMax ? max_input(r, i) : sum_input(r, i);
    Traffic t = measure(comm, OpKind::kAllReduce, [&] { comm.all_reduce(v.data(), n, op); });
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      float want = op == ReduceOp::kMax ? expected_max(N, i) : expected_sum(N, i);
      if (op == ReduceOp::kAvg) want /= static_cast<float>(N);
      bool ok =
          op == ReduceOp::kAvg ? std::fabs(v[i] - want) <= 1e-6f * std::fabs(want) : v[i] == want;
      if (!ok && bad++ < 3) {
        ADD_FAILURE() << "all_reduce " << reduce_op_name(op) << " n " << n << " [" << i
                      << "] = " << v[i] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0);
    const int64_t T = 4 * n;
    if (ring_is_symmetric(n, N)) {
      EXPECT_EQ(t.sent, 2 * (N - 1) * T / N) << "n " << n;
      EXPECT_EQ(t.received, 2 * (N - 1) * T / N) << "n " << n;
    }
    ledger.add("all_reduce f32 n=" + std::to_string(n), t, 2 * (N - 1) * T, 2 * (N - 1) * T);
  }
}

void check_all_reduce_bf16(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  std::vector<float> v(n);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    for (int64_t i = 0; i < n; ++i) v[i] = op == ReduceOp::kMax ? max_input(r, i) : sum_input(r, i);
    Traffic t = measure(comm, OpKind::kAllReduce,
                        [&] { comm.all_reduce(v.data(), n, op, WireDtype::kBF16); });
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      // Reference: exact (double) reduction of the bf16-rounded inputs; the result may differ by
      // the final rounding to bf16 (half an ulp, 2^-9 relative) plus f32 accumulation error.
      double want = 0;
      for (int p = 0; p < N; ++p) {
        double x =
            bf16_to_float(float_to_bf16(op == ReduceOp::kMax ? max_input(p, i) : sum_input(p, i)));
        want = op == ReduceOp::kMax ? (p == 0 ? x : std::max(want, x)) : want + x;
      }
      if (op == ReduceOp::kAvg) want /= N;
      if (!(std::fabs(v[i] - want) <= std::ldexp(std::fabs(want), -8)) && bad++ < 3) {
        ADD_FAILURE() << "bf16 all_reduce " << reduce_op_name(op) << " n " << n << " [" << i
                      << "] = " << v[i] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0);
    // The result must be bitwise identical on every rank.
    uint64_t h = testutil::fnv_hash(v.data(), v.size() * sizeof(float));
    std::vector<uint64_t> all(N);
    comm.all_gather_bytes(reinterpret_cast<const uint8_t*>(&h),
                          reinterpret_cast<uint8_t*>(all.data()), 8);
    for (int p = 0; p < N; ++p) EXPECT_EQ(all[p], h) << "rank " << p << " differs, n " << n;
    // alltoallv + allgatherv of bf16 blocks: (N-1)/N * 2n bytes each, each way.
    if (n % N == 0) {
      EXPECT_EQ(t.sent, 2 * (N - 1) * (2 * n) / N);
      EXPECT_EQ(t.received, 2 * (N - 1) * (2 * n) / N);
    }
    ledger.add("all_reduce bf16 n=" + std::to_string(n), t, 2 * (N - 1) * 2 * n,
               2 * (N - 1) * 2 * n);
  }
}

void check_reduce_scatter(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  std::vector<float> in(N * n), out(n, -1.f);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    for (int64_t j = 0; j < N * n; ++j)
      in[j] = op == ReduceOp::kMax ? max_input(r, j) : sum_input(r, j);
    Traffic t = measure(comm, OpKind::kReduceScatter,
                        [&] { comm.reduce_scatter(in.data(), out.data(), n, op); });
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = r * n + i;  // this rank owns block r
      float want = op == ReduceOp::kMax ? expected_max(N, j) : expected_sum(N, j);
      if (op == ReduceOp::kAvg) want /= static_cast<float>(N);
      bool ok = op == ReduceOp::kAvg ? std::fabs(out[i] - want) <= 1e-6f * std::fabs(want)
                                     : out[i] == want;
      if (!ok && bad++ < 3) {
        ADD_FAILURE() << "reduce_scatter " << reduce_op_name(op) << " n " << n << " [" << i
                      << "] = " << out[i] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(t.sent, (N - 1) * 4 * n);
    EXPECT_EQ(t.received, (N - 1) * 4 * n);
    ledger.add("reduce_scatter", t, N * (N - 1) * 4 * n, N * (N - 1) * 4 * n);
  }
}

std::vector<int64_t> counts_for(int world) {
  std::vector<int64_t> counts = {0, 1, 7, 1000};
  if (world <= 4) counts.push_back(int64_t{1} << 20);
  return counts;
}

class ReductionMpTest : public ::testing::TestWithParam<int> {};

TEST_P(ReductionMpTest, AllReduceAndReduceScatterMatchClosedForms) {
  const int world = GetParam();
  testutil::TempDir dir;
  auto result = testutil::run_ranks(world, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, world, 5s);
    TrafficLedger ledger;
    for (int64_t n : counts_for(world)) {
      check_all_reduce_f32(*comm, n, ledger);
      check_all_reduce_bf16(*comm, n, ledger);
      check_reduce_scatter(*comm, n, ledger);
    }
    ledger.check_totals(*comm);
    if (world == 1) {
      EXPECT_EQ(comm->stats().total().bytes_sent, 0);
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ReductionMpTest, ::testing::Values(1, 2, 3, 4));

TEST(ReductionMpTest8, AllReduceOnEightRanks) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(8, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 8, 5s);
    TrafficLedger ledger;
    for (int64_t n : counts_for(8)) {
      check_all_reduce_f32(*comm, n, ledger);
      check_all_reduce_bf16(*comm, n, ledger);
    }
    ledger.check_totals(*comm);
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
