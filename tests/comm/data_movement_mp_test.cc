// all_gather (f32, uneven, bytes), broadcast, all_to_all(_v), send/recv, barrier and the async
// forms across real processes, for world sizes 1-4 x counts 0, 1, 7, 1000, 2^20, against
// closed-form values and the traffic formulas.
#include <gtest/gtest.h>

#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::measure;
using testutil::TrafficLedger;

float pattern(int64_t i) {
  return 0.5f * static_cast<float>(i % 1024);
}

// Uneven per-rank counts for the _v variants, including empty ranks: n, n+1, 0, 1, n, ...
std::vector<int64_t> uneven_counts(int64_t n, int world) {
  std::vector<int64_t> c(world);
  for (int p = 0; p < world; ++p) c[p] = (n + p) % (n + 2);
  return c;
}

// Counts the first mismatches as failures, at most 3 messages per check.
struct Mismatches {
  const char* what;
  int64_t n;
  int64_t count = 0;
  template <typename T, typename U>
  void expect(T got, U want, int64_t index) {
    if (got == want) return;
    if (count++ < 3) {
      ADD_FAILURE() << what << " n " << n << " [" << index << "] = " << +got << ", want " << +want;
    }
  }
  ~Mismatches() { EXPECT_EQ(count, 0) << what << " n " << n; }
};

void check_all_gather(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  {
    std::vector<float> in(n), out(N * n, -1.f);
    for (int64_t i = 0; i < n; ++i) in[i] = 1000.f * r + pattern(i);
    Traffic t =
        measure(comm, OpKind::kAllGather, [&] { comm.all_gather(in.data(), out.data(), n); });
    Mismatches m{"all_gather", n};
    for (int p = 0; p < N; ++p)
      for (int64_t i = 0; i < n; ++i) m.expect(out[p * n + i], 1000.f * p + pattern(i), p * n + i);
    EXPECT_EQ(t.sent, (N - 1) * 4 * n);
    EXPECT_EQ(t.received, (N - 1) * 4 * n);
    ledger.add("all_gather", t, N * (N - 1) * 4 * n, N * (N - 1) * 4 * n);
  }
  const std::vector<int64_t> c = uneven_counts(n, N);
  int64_t total = 0;
  for (int64_t x : c) total += x;
  {
    std::vector<float> in(c[r]), out(total, -1.f);
    for (int64_t i = 0; i < c[r]; ++i) in[i] = 1000.f * r + pattern(i);
    Traffic t =
        measure(comm, OpKind::kAllGatherV, [&] { comm.all_gather_v(in.data(), out.data(), c); });
    Mismatches m{"all_gather_v", n};
    int64_t off = 0;
    for (int p = 0; p < N; off += c[p], ++p)
      for (int64_t i = 0; i < c[p]; ++i) m.expect(out[off + i], 1000.f * p + pattern(i), off + i);
    // Ring: a rank forwards every block but its successor's and receives every block but its own.
    EXPECT_EQ(t.sent, N == 1 ? 0 : 4 * (total - c[(r + 1) % N]));
    EXPECT_EQ(t.received, N == 1 ? 0 : 4 * (total - c[r]));
    ledger.add("all_gather_v", t, (N - 1) * 4 * total, (N - 1) * 4 * total);
  }
  {
    std::vector<uint8_t> in(n), out(N * n, 0);
    for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(31 * r + 7 * i);
    Traffic t = measure(comm, OpKind::kAllGatherBytes,
                        [&] { comm.all_gather_bytes(in.data(), out.data(), n); });
    Mismatches m{"all_gather_bytes", n};
    for (int p = 0; p < N; ++p)
      for (int64_t i = 0; i < n; ++i)
        m.expect(out[p * n + i], static_cast<uint8_t>(31 * p + 7 * i), p * n + i);
    EXPECT_EQ(t.sent, (N - 1) * n);
    ledger.add("all_gather_bytes", t, N * (N - 1) * n, N * (N - 1) * n);
  }
  {
    std::vector<uint8_t> in(c[r]), out(total, 0);
    for (int64_t i = 0; i < c[r]; ++i) in[i] = static_cast<uint8_t>(31 * r + 7 * i);
    Traffic t = measure(comm, OpKind::kAllGatherBytes,
                        [&] { comm.all_gather_bytes_v(in.data(), out.data(), c); });
    Mismatches m{"all_gather_bytes_v", n};
    int64_t off = 0;
    for (int p = 0; p < N; off += c[p], ++p)
      for (int64_t i = 0; i < c[p]; ++i)
        m.expect(out[off + i], static_cast<uint8_t>(31 * p + 7 * i), off + i);
    ledger.add("all_gather_bytes_v", t, (N - 1) * total, (N - 1) * total);
  }
}

void check_broadcast(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  const int root = N - 1;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = r == root ? 7.f + pattern(i) : -1.f;
  Traffic t = measure(comm, OpKind::kBroadcast, [&] { comm.broadcast(v.data(), n, root); });
  Mismatches m{"broadcast", n};
  for (int64_t i = 0; i < n; ++i) m.expect(v[i], 7.f + pattern(i), i);
  EXPECT_EQ(t.received, r == root ? 0 : 4 * n);
  ledger.add("broadcast", t, (N - 1) * 4 * n, (N - 1) * 4 * n);

  std::vector<uint8_t> b(n);
  for (int64_t i = 0; i < n; ++i) b[i] = r == 0 ? static_cast<uint8_t>(i * 13) : 0;
  t = measure(comm, OpKind::kBroadcast, [&] { comm.broadcast_bytes(b.data(), n, 0); });
  Mismatches mb{"broadcast_bytes", n};
  for (int64_t i = 0; i < n; ++i) mb.expect(b[i], static_cast<uint8_t>(i * 13), i);
  ledger.add("broadcast_bytes", t, (N - 1) * n, (N - 1) * n);
}

void check_all_to_all(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  {
    std::vector<float> in(N * n), out(N * n, -1.f);
    for (int p = 0; p < N; ++p)
      for (int64_t i = 0; i < n; ++i) in[p * n + i] = 100.f * r + p + pattern(i);
    Traffic t =
        measure(comm, OpKind::kAllToAll, [&] { comm.all_to_all(in.data(), out.data(), n); });
    Mismatches m{"all_to_all", n};
    for (int p = 0; p < N; ++p)
      for (int64_t i = 0; i < n; ++i)
        m.expect(out[p * n + i], 100.f * p + r + pattern(i), p * n + i);
    EXPECT_EQ(t.sent, (N - 1) * 4 * n);
    EXPECT_EQ(t.received, (N - 1) * 4 * n);
    ledger.add("all_to_all", t, N * (N - 1) * 4 * n, N * (N - 1) * 4 * n);
  }
  // cnt(s, d): elements rank s sends rank d; includes zeros and asymmetric pairs.
  auto cnt = [&](int s, int d) { return (n + s + 2 * d) % (n + 1); };
  std::vector<int64_t> sc(N), rc(N);
  int64_t sum_sent = 0, sum_recv = 0, total_all = 0;
  for (int p = 0; p < N; ++p) {
    sc[p] = cnt(r, p);
    rc[p] = cnt(p, r);
    if (p != r) sum_sent += sc[p], sum_recv += rc[p];
    for (int q = 0; q < N; ++q)
      if (p != q) total_all += cnt(p, q);
  }
  std::vector<float> in, out;
  for (int p = 0; p < N; ++p)
    for (int64_t i = 0; i < sc[p]; ++i) in.push_back(1000.f * r + p + 0.5f * (i % 64));
  for (int p = 0; p < N; ++p) out.resize(out.size() + rc[p], -1.f);
  Traffic t =
      measure(comm, OpKind::kAllToAllV, [&] { comm.all_to_all_v(in.data(), sc, out.data(), rc); });
  Mismatches m{"all_to_all_v", n};
  int64_t off = 0;
  for (int p = 0; p < N; off += rc[p], ++p)
    for (int64_t i = 0; i < rc[p]; ++i)
      m.expect(out[off + i], 1000.f * p + r + 0.5f * (i % 64), off + i);
  EXPECT_EQ(t.sent, 4 * sum_sent);
  EXPECT_EQ(t.received, 4 * sum_recv);
  ledger.add("all_to_all_v", t, 4 * total_all, 4 * total_all);
}

void check_send_recv_and_barrier(Communicator& comm, int64_t n, TrafficLedger& ledger) {
  const int N = comm.size(), r = comm.rank();
  Traffic b = measure(comm, OpKind::kBarrier, [&] { comm.barrier(); });
  EXPECT_EQ(b.sent + b.received, 0);
  if (N == 1) return;
  const int next = (r + 1) % N, prev = (r + N - 1) % N;
  std::vector<float> out(n), in(n, -1.f);
  for (int64_t i = 0; i < n; ++i) out[i] = 10.f * r + pattern(i);
  const OpCounters s0 = comm.stats().get(OpKind::kSend), r0 = comm.stats().get(OpKind::kRecv);
  // Both directions in flight before waiting: a send completes only when the peer receives.
  auto s = comm.send_async(out.data(), 4 * n, next, 7);
  auto q = comm.recv_async(in.data(), 4 * n, prev, 7);
  s->wait();
  q->wait();
  EXPECT_TRUE(s->is_completed());
  EXPECT_TRUE(q->is_completed());
  Mismatches m{"send/recv", n};
  for (int64_t i = 0; i < n; ++i) m.expect(in[i], 10.f * prev + pattern(i), i);
  const Traffic t{comm.stats().get(OpKind::kSend).bytes_sent - s0.bytes_sent,
                  comm.stats().get(OpKind::kRecv).bytes_received - r0.bytes_received};
  EXPECT_EQ(t.sent, 4 * n);
  EXPECT_EQ(t.received, 4 * n);
  ledger.add("send+recv", t, N * 4 * n, N * 4 * n);
}

// Several operations in flight at once, waited in reverse order: FIFO execution keeps every
// rank's sequence identical, so results are the same as issuing them one by one.
void check_async(Communicator& comm, int64_t n) {
  const int N = comm.size(), r = comm.rank();
  std::vector<float> a(n), b(n), rs_in(N * n), rs_out(n), ag_out(N * n);
  for (int64_t i = 0; i < n; ++i) a[i] = r + pattern(i), b[i] = 2.f * r;
  for (int64_t j = 0; j < N * n; ++j) rs_in[j] = 1.f;
  auto w1 = comm.all_reduce_async(a.data(), n, ReduceOp::kSum);
  auto w2 = comm.all_reduce_async(b.data(), n, ReduceOp::kMax);
  auto w3 = comm.reduce_scatter_async(rs_in.data(), rs_out.data(), n, ReduceOp::kSum);
  auto w4 = comm.all_gather_async(rs_out.data() /* not read before w3 finishes: FIFO */,
                                  ag_out.data(), n);
  auto w5 = comm.barrier_async();
  for (Work* w : {w5.get(), w4.get(), w3.get(), w2.get(), w1.get()}) w->wait();
  for (Work* w : {w1.get(), w2.get(), w3.get(), w4.get(), w5.get()}) EXPECT_TRUE(w->is_completed());
  Mismatches m{"async", n};
  for (int64_t i = 0; i < n; ++i) {
    m.expect(a[i], N * (N - 1) / 2.f + N * pattern(i), i);
    m.expect(b[i], 2.f * (N - 1), i);
    m.expect(rs_out[i], static_cast<float>(N), i);
  }
  for (int64_t j = 0; j < N * n; ++j) m.expect(ag_out[j], static_cast<float>(N), j);
}

class DataMovementMpTest : public ::testing::TestWithParam<int> {};

TEST_P(DataMovementMpTest, GatherBroadcastAllToAllSendRecvAsync) {
  const int world = GetParam();
  testutil::TempDir dir;
  auto result = testutil::run_ranks(world, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, world, 5s);
    TrafficLedger ledger;
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1} << 20}) {
      check_all_gather(*comm, n, ledger);
      check_broadcast(*comm, n, ledger);
      check_all_to_all(*comm, n, ledger);
      check_send_recv_and_barrier(*comm, n, ledger);
      check_async(*comm, n);
    }
    ledger.check_totals(*comm);
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DataMovementMpTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace brigade
