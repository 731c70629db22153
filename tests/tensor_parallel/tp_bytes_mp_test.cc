// Bytes tensor parallelism moves per training step (one forward + backward of one micro-batch),
// counted by the tp communicator's CommStats, against the formula (docs/parallelism.md). With
// R = B*T token rows, C = d_model, L = n_layer, N = tp:
//   plain tp:   all-reduce of R*C floats: 2 per block + 1 (embedding) in forward, 2 per block
//               + 1 (head input) in backward; plus the vocab-parallel cross-entropy: one
//               all-reduce (max) of R floats and one (sum-exp, target logit) of 2R floats.
//   sequence parallel: each R*C all-reduce becomes an all-gather and a reduce-scatter of
//               R*C/N floats per rank (4L + 2 of each per step), plus the same cross-entropy
//               all-reduces and one all-reduce of 2C floats (gain, bias) per layernorm
//               (2L + 1), whose gradients each rank computed from its own rows.
// Nothing else may be sent. Bytes per call come from comm/wire_traffic.h, the algorithms Gloo
// runs; the tests there check those formulas against the kernel's TCP counters.
#include <gloo/allreduce.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "brigade/comm/wire_traffic.h"
#include "brigade/model/gpt.h"
#include "brigade/tensor/rng.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::AllRanksOk;
using testutil::run_ranks;
using testutil::TempDir;

const GptConfig kCfg{.vocab = 50, .seq_len = 16, .d_model = 32, .n_layer = 3, .n_head = 4};
constexpr int64_t kBatch = 2;
const int64_t kMaxSegment =
    static_cast<int64_t>(gloo::detail::AllreduceOptionsImpl::kMaxSegmentSize);

Batch make_batch() {
  Batch b;
  b.size = kBatch;
  for (int64_t i = 0; i < kBatch * kCfg.seq_len; ++i) {
    b.tokens.push_back(static_cast<int32_t>(random_uniform(1, 2, i) * kCfg.vocab));
    b.targets.push_back(static_cast<int32_t>(random_uniform(1, 3, i) * kCfg.vocab));
  }
  return b;
}

struct Expected {
  OpCounters all_reduce, all_gather, reduce_scatter;
};

void add(OpCounters& c, const Traffic& t, int64_t calls = 1) {
  c.calls += calls;
  c.bytes_sent += calls * t.sent;
  c.bytes_received += calls * t.received;
}

Expected formula(int N, int rank, bool sp) {
  const int64_t R = kBatch * kCfg.seq_len, C = kCfg.d_model, L = kCfg.n_layer;
  Expected e;
  auto all_reduce = [&](int64_t floats) {
    return ring_allreduce_traffic(floats * 4, 4, N, rank, kMaxSegment);
  };
  add(e.all_reduce, all_reduce(R));      // cross-entropy: row max
  add(e.all_reduce, all_reduce(2 * R));  // cross-entropy: sum-exp and target logit
  if (!sp) {
    add(e.all_reduce, all_reduce(R * C), 2 * (2 * L + 1));
    return e;
  }
  const std::vector<int64_t> blocks(N, R * C / N * 4);
  add(e.all_gather, ring_allgatherv_traffic(blocks, rank), 4 * L + 2);
  add(e.reduce_scatter, pairwise_alltoallv_traffic(blocks, blocks, rank), 4 * L + 2);
  add(e.all_reduce, all_reduce(2 * C), 2 * L + 1);  // layernorm gain + bias gradients
  return e;
}

void expect_counters(const OpCounters& got, const OpCounters& want, const char* kind) {
  EXPECT_EQ(got.calls, want.calls) << kind;
  EXPECT_EQ(got.bytes_sent, want.bytes_sent) << kind;
  EXPECT_EQ(got.bytes_received, want.bytes_received) << kind;
}

class TpBytes : public ::testing::TestWithParam<std::pair<int, bool>> {};

TEST_P(TpBytes, PerStepTrafficMatchesTheFormula) {
  const auto [N, sp] = GetParam();
  TempDir dir;
  auto result = run_ranks(N, 60s, [&, N = N, sp = sp](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, N, 20000ms, "tp");
    Gpt m(kCfg, kBatch, TpContext{.comm = comm.get(), .sequence_parallel = sp});
    m.initialize(3);
    const Batch b = make_batch();
    comm->stats().reset();
    m.zero_grads();
    m.forward(b);
    m.backward(b, 1.0f);
    const CommStats& s = comm->stats();
    const Expected want = formula(N, rank, sp);
    expect_counters(s.get(OpKind::kAllReduce), want.all_reduce, "all_reduce");
    expect_counters(s.get(OpKind::kAllGather), want.all_gather, "all_gather");
    expect_counters(s.get(OpKind::kReduceScatter), want.reduce_scatter, "reduce_scatter");
    const OpCounters total = s.total();
    EXPECT_EQ(total.calls,
              want.all_reduce.calls + want.all_gather.calls + want.reduce_scatter.calls)
        << "an unexpected collective ran";
    if (rank == 0)
      std::printf("tp=%d sp=%d: %lld calls, sent %lld bytes per step (rank 0)\n", N, sp ? 1 : 0,
                  static_cast<long long>(total.calls), static_cast<long long>(total.bytes_sent));
  });
  EXPECT_TRUE(AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpBytes,
                         ::testing::Values(std::pair{2, false}, std::pair{4, false},
                                           std::pair{2, true}, std::pair{4, true}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) +
                                  (info.param.second ? "_sp" : "");
                         });

}  // namespace
}  // namespace brigade
