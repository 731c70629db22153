// OpProfiler: timing against sleeps bounded by an independent stopwatch, exact counts and
// sums from known durations, the null profiler, and the per-op call counts of a GPT and an
// MLP forward + backward against counts derived from the architecture.
#include "brigade/monitor/op_profiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "brigade/model/gpt.h"
#include "brigade/model/mlp_classifier.h"
#include "brigade/monitor/timer.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(OpProfiler, SleepIsTimedBetweenItsDurationAndTheOuterWallClock) {
  OpProfiler prof;
  constexpr int kCalls = 3;
  constexpr int kSleepMs = 20;
  Stopwatch outer;
  for (int i = 0; i < kCalls; ++i) {
    ScopedOp op(&prof, Op::kAttentionForward);
    std::this_thread::sleep_for(milliseconds(kSleepMs));
  }
  const double outer_ms = outer.millis();
  EXPECT_EQ(prof.calls(Op::kAttentionForward), kCalls);
  // sleep_for sleeps at least its duration; the scopes lie inside the outer stopwatch.
  EXPECT_GE(prof.total_ms(Op::kAttentionForward), kCalls * kSleepMs);
  EXPECT_LE(prof.total_ms(Op::kAttentionForward), outer_ms);
  // A loaded machine may oversleep, but not by 100 ms per 20 ms sleep.
  EXPECT_LT(prof.total_ms(Op::kAttentionForward), kCalls * (kSleepMs + 100));
  EXPECT_DOUBLE_EQ(prof.total_ms(), prof.total_ms(Op::kAttentionForward));
}

TEST(OpProfiler, CountsAndSumsAreExact) {
  OpProfiler prof;
  for (int i = 0; i < 7; ++i) prof.add(Op::kMatmulForward, nanoseconds(1'000'000));  // 7 ms
  for (int i = 0; i < 2; ++i) prof.add(Op::kGeluForward, nanoseconds(500'000));      // 1 ms
  prof.add(Op::kOptimizer, milliseconds(2));                                         // 2 ms
  EXPECT_EQ(prof.calls(Op::kMatmulForward), 7);
  EXPECT_EQ(prof.calls(Op::kGeluForward), 2);
  EXPECT_EQ(prof.calls(Op::kOptimizer), 1);
  EXPECT_EQ(prof.calls(Op::kMatmulBackward), 0);
  EXPECT_DOUBLE_EQ(prof.total_ms(Op::kMatmulForward), 7.0);
  EXPECT_DOUBLE_EQ(prof.total_ms(), 10.0);

  // Sorted by time, only ops that ran, shares of the sum.
  const std::vector<OpRow> rows = prof.report();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].op, Op::kMatmulForward);
  EXPECT_EQ(rows[0].name, "matmul_forward");
  EXPECT_EQ(rows[0].calls, 7);
  EXPECT_DOUBLE_EQ(rows[0].share_pct, 70.0);
  EXPECT_EQ(rows[1].op, Op::kOptimizer);
  EXPECT_DOUBLE_EQ(rows[1].share_pct, 20.0);
  EXPECT_EQ(rows[2].op, Op::kGeluForward);
  EXPECT_DOUBLE_EQ(rows[2].share_pct, 10.0);

  // Against a wall time of 20 ms the shares halve and the table shows the untimed rest.
  EXPECT_DOUBLE_EQ(prof.report(20.0)[0].share_pct, 35.0);
  const std::string table = prof.format_report(20.0);
  EXPECT_NE(table.find("matmul_forward"), std::string::npos);
  EXPECT_NE(table.find("(untimed)"), std::string::npos);
  EXPECT_NE(table.find("50.0%"), std::string::npos) << table;  // 10 of 20 ms untimed

  prof.reset();
  EXPECT_EQ(prof.calls(Op::kMatmulForward), 0);
  EXPECT_TRUE(prof.report().empty());
}

TEST(OpProfiler, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumOps; ++i) names.insert(op_name(static_cast<Op>(i)));
  EXPECT_EQ(static_cast<int>(names.size()), kNumOps);
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(OpProfiler, NullProfilerStillRunsTheCallAndRecordsNothing) {
  int ran = 0;
  timed(
      nullptr, Op::kGeluForward, [&](int add) { ran += add; }, 3);
  { ScopedOp op(nullptr, Op::kGeluForward); }
  EXPECT_EQ(ran, 3);

  OpProfiler prof;
  timed(
      &prof, Op::kGeluForward, [&](int add) { ran += add; }, 2);
  EXPECT_EQ(ran, 5);
  EXPECT_EQ(prof.calls(Op::kGeluForward), 1);
}

Batch random_tokens(const GptConfig& c, int64_t size, uint64_t seed) {
  Batch b;
  b.size = size;
  for (int64_t i = 0; i < size * c.seq_len; ++i) {
    auto tok = [&](uint64_t key) {
      return static_cast<int32_t>(random_uniform(seed, key, static_cast<uint64_t>(i)) *
                                  static_cast<float>(c.vocab));
    };
    b.tokens.push_back(tok(1));
    b.targets.push_back(tok(2));
  }
  return b;
}

TEST(OpProfiler, GptForwardBackwardCountsEveryKernelCall) {
  const GptConfig c{.vocab = 11, .seq_len = 6, .d_model = 8, .n_layer = 3, .n_head = 2};
  Gpt model(c, 2);
  model.initialize(1);
  const Batch batch = random_tokens(c, 2, 4);

  // The reference run, without a profiler.
  model.zero_grads();
  const float loss_plain = model.forward(batch);
  model.backward(batch, 1.0f);
  const std::vector<float> grads_plain(model.grads(), model.grads() + model.num_params());

  OpProfiler prof;
  model.set_profiler(&prof);
  constexpr int64_t kPasses = 2;
  float loss = 0;
  for (int64_t pass = 0; pass < kPasses; ++pass) {
    model.zero_grads();
    loss = model.forward(batch);
    model.backward(batch, 1.0f);
  }
  // Timing does not change the arithmetic.
  EXPECT_EQ(loss, loss_plain);
  EXPECT_EQ(std::vector<float>(model.grads(), model.grads() + model.num_params()), grads_plain);

  // Per pass, from the architecture: each block has ln_1, c_attn, attention, attn.c_proj,
  // residual, ln_2, c_fc, gelu, mlp.c_proj, residual; then ln_f and the tied head. Backward
  // zeroes dln_f and dresidual once, and per block dfch_gelu, dfch, dln_2, datty, dqkv, dln_1.
  const int64_t L = c.n_layer;
  const std::vector<std::pair<Op, int64_t>> want = {{Op::kEncoderForward, 1},
                                                    {Op::kEncoderBackward, 1},
                                                    {Op::kLayernormForward, 2 * L + 1},
                                                    {Op::kLayernormBackward, 2 * L + 1},
                                                    {Op::kMatmulForward, 4 * L + 1},
                                                    {Op::kMatmulBackward, 4 * L + 1},
                                                    {Op::kAttentionForward, L},
                                                    {Op::kAttentionBackward, L},
                                                    {Op::kGeluForward, L},
                                                    {Op::kGeluBackward, L},
                                                    {Op::kConv2dForward, 0},
                                                    {Op::kConv2dBackward, 0},
                                                    {Op::kMaxPoolForward, 0},
                                                    {Op::kMaxPoolBackward, 0},
                                                    {Op::kReluForward, 0},
                                                    {Op::kReluBackward, 0},
                                                    {Op::kResidualForward, 2 * L},
                                                    {Op::kCrossentropyForward, 1},
                                                    {Op::kCrossentropyBackward, 1},
                                                    {Op::kZeroFill, 6 * L + 2},
                                                    {Op::kZeroGrads, 0},
                                                    {Op::kGradNorm, 0},
                                                    {Op::kOptimizer, 0}};
  ASSERT_EQ(static_cast<int>(want.size()), kNumOps);  // a new op needs a count here
  for (const auto& [op, calls] : want) EXPECT_EQ(prof.calls(op), kPasses * calls) << op_name(op);

  // Detached: another pass records nothing.
  model.set_profiler(nullptr);
  model.forward(batch);
  model.backward(batch, 1.0f);
  EXPECT_EQ(prof.calls(Op::kMatmulForward), kPasses * (4 * L + 1));
}

TEST(OpProfiler, MlpForwardBackwardCountsEveryKernelCall) {
  const MlpConfig c{.input = 5, .hidden = {7, 6, 4}, .classes = 3};
  MlpClassifier model(c, 4);
  model.initialize(2);
  Batch batch;
  batch.size = 4;
  for (int64_t i = 0; i < 4 * c.input; ++i)
    batch.features.push_back(random_uniform(3, 1, static_cast<uint64_t>(i)));
  batch.targets = {0, 2, 1, 2};

  OpProfiler prof;
  model.set_profiler(&prof);
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  // H hidden layers + head: a matmul each way per layer, a GELU each way per hidden layer;
  // backward zeroes each hidden layer's output gradient and pre-activation gradient.
  const auto H = static_cast<int64_t>(c.hidden.size());
  EXPECT_EQ(prof.calls(Op::kMatmulForward), H + 1);
  EXPECT_EQ(prof.calls(Op::kMatmulBackward), H + 1);
  EXPECT_EQ(prof.calls(Op::kGeluForward), H);
  EXPECT_EQ(prof.calls(Op::kGeluBackward), H);
  EXPECT_EQ(prof.calls(Op::kCrossentropyForward), 1);
  EXPECT_EQ(prof.calls(Op::kCrossentropyBackward), 1);
  EXPECT_EQ(prof.calls(Op::kZeroFill), 2 * H);
  int64_t total = 0;
  for (const OpRow& r : prof.report()) total += r.calls;
  EXPECT_EQ(total, 2 * (H + 1) + 2 * H + 2 + 2 * H);
}

}  // namespace
}  // namespace brigade
