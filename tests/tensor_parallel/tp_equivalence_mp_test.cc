// Tensor parallelism equals the single-process model. Every rank (a real process, talking over
// loopback) builds the tp = 1 GPT itself as the reference, copies its slice of the reference
// weights into its tp shard, and runs the same two accumulated micro-batches; then
//   - the loss of each micro-batch equals the reference loss,
//   - every gradient of this rank's shard equals the slice of the reference gradient (vocab
//     padding rows exactly zero), and gather_full() reassembles the whole reference gradient,
//   - replicated tensors (wpe, layernorms, row-parallel biases) have bitwise identical
//     gradients on every tp rank, the grad-ready hook reports every gradient once per backward
//     and only once it is final, and the global squared gradient norm is the reference's,
// for tp = 2 and 4, with and without sequence parallelism (which must also equal plain tp),
// on a vocab (13) that needs padding at both. tp_bytes_mp_test.cc counts the bytes TP moves per
// step and checks them against the formula (docs/parallelism.md).
//
// Tolerance: the tp run adds the same products in another order (the row-parallel matmuls sum
// tp partial dot products, the ring all-reduce sums in ring order, the vocab-parallel softmax
// sums tp partial sums), so f32 results differ by rounding only. We require per tensor
// max |g_tp - g_1| <= 1e-4 * max |g_1| + 1e-7 and |loss_tp - loss_1| <= 1e-5 * loss_1; a
// wrong term (a missing all-reduce, a mis-sliced head) is off by O(max |g_1|).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "brigade/model/gpt.h"
#include "brigade/model/lora.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/tensor/rng.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"
#include "model/grad_check.h"

namespace brigade::tp_equivalence_mp_test {
namespace {

using namespace std::chrono_literals;
using testutil::AllRanksOk;
using testutil::run_ranks;
using testutil::TempDir;

const GptConfig kCfg{.vocab = 13, .seq_len = 8, .d_model = 16, .n_layer = 2, .n_head = 4};
// With LoRA adapters of rank 3 on all four linear layers of every block (model/lora.h): the
// column-parallel layers' B and the row-parallel layers' A are split, the other factor
// replicated.
GptConfig with_lora(GptConfig c) {
  c.lora_rank = 3;
  c.lora_alpha = 6.0;
  c.lora_targets = kLoraAttn | kLoraAttnProj | kLoraFc | kLoraFcProj;
  return c;
}
constexpr int64_t kBatch = 2;

// Random tokens, targets the next token, one target ignored.
Batch make_batch(uint64_t seed) {
  Batch b;
  b.size = kBatch;
  const int64_t n = kBatch * kCfg.seq_len;
  for (int64_t i = 0; i <= n; ++i) {
    const auto tok = static_cast<int32_t>(random_uniform(seed, 1, static_cast<uint64_t>(i)) *
                                          static_cast<float>(kCfg.vocab));
    if (i < n) b.tokens.push_back(tok);
    if (i > 0) b.targets.push_back(tok);
  }
  b.targets[3] = -1;
  return b;
}

// Two micro-batches accumulated with loss scale 1/2, as gradient accumulation runs them.
std::vector<float> run_step(Gpt& model) {
  model.zero_grads();
  std::vector<float> losses;
  for (uint64_t seed : {3, 4}) {
    const Batch b = make_batch(seed);
    losses.push_back(model.forward(b));
    model.backward(b, 0.5f);
  }
  return losses;
}

// The tp = 1 model with perturbed weights (so gains and biases carry gradient).
struct Reference {
  Gpt model;
  std::vector<float> losses;
  explicit Reference(const GptConfig& config) : model(config, kBatch) {
    model.initialize(7);
    testing::perturb_params(model, 0.1f, 8);
    losses = run_step(model);
  }
};

void expect_close(const ParamLayout& layout, const float* got, const float* want,
                  const std::string& what) {
  for (const ParamSpec& s : layout.specs()) {
    float scale = 0.0f, diff = 0.0f;
    for (int64_t i = 0; i < s.numel; ++i) {
      scale = std::max(scale, std::fabs(want[s.offset + i]));
      diff = std::max(diff, std::fabs(got[s.offset + i] - want[s.offset + i]));
    }
    EXPECT_LE(diff, 1e-4f * scale + 1e-7f) << what << " " << s.name << " (max |g| " << scale << ")";
  }
}

// Checks a tp model (already stepped) against the reference.
void check_against_reference(const Reference& ref, Gpt& m, const std::vector<float>& losses,
                             const TpContext& tp, const std::string& what) {
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], ref.losses[i], 1e-5f * ref.losses[i]) << what << " micro-batch " << i;
  // This rank's shard of every gradient.
  std::vector<float> want(static_cast<size_t>(m.num_params()));
  slice_from_full(m.layout(), ref.model.layout(), ref.model.grads(), want.data());
  expect_close(m.layout(), m.grads(), want.data(), what + " shard");
  const ParamSpec& wte = m.layout().at("wte.weight");
  for (int64_t i = 0; i < wte.numel; ++i) {
    if (wte.full_index(i) < 0) {
      ASSERT_EQ(m.grads()[wte.offset + i], 0.0f) << what << ": padding row gradient";
    }
  }
  // Gathered into the tp = 1 layout.
  std::vector<float> full(static_cast<size_t>(ref.model.num_params()));
  ASSERT_EQ(m.full_layout().total(), ref.model.num_params());
  gather_full(tp, m.layout(), m.full_layout(), m.grads(), full.data());
  expect_close(ref.model.layout(), full.data(), ref.model.grads(), what + " gathered");
  // The global gradient norm (for clipping) counts replicated tensors once.
  double want_sq = 0.0;
  for (int64_t i = 0; i < ref.model.num_params(); ++i)
    want_sq += static_cast<double>(ref.model.grads()[i]) * ref.model.grads()[i];
  EXPECT_NEAR(sum_of_squares_full(tp, m.layout(), m.grads()), want_sq, 1e-4 * want_sq) << what;
  // Replicated gradients are the same bits on every rank.
  for (const ParamSpec& s : m.layout().specs()) {
    if (s.tp_split != TpSplit::kReplicated) continue;
    std::vector<float> mine(m.grads() + s.offset, m.grads() + s.offset + s.numel);
    std::vector<float> rank0 = mine;
    tp.comm->broadcast(rank0.data(), s.numel, 0);
    EXPECT_EQ(mine, rank0) << what << " " << s.name << " differs from tp rank 0";
  }
}

struct Layout {
  int tp;
  bool sp;
  bool lora = false;
};

class TpEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(TpEquivalence, LossAndEveryGradientEqualTp1) {
  const Layout p = GetParam();
  TempDir dir;
  auto result = run_ranks(p.tp, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, p.tp, 20000ms, "tp");
    const GptConfig config = p.lora ? with_lora(kCfg) : kCfg;
    const Reference ref(config);
    const TpContext tp{.comm = comm.get(), .sequence_parallel = p.sp};
    Gpt m(config, kBatch, tp);
    slice_from_full(m.layout(), ref.model.layout(), ref.model.params(), m.params());
    // What the grad-ready hook reports must already be final (data parallelism reduces it at
    // once): snapshot each range when reported, compare with the end of the step.
    std::vector<float> snapshot(static_cast<size_t>(m.num_params()), NAN);
    std::vector<int> reports(static_cast<size_t>(m.num_params()), 0);
    m.set_grad_ready_hook([&](int64_t offset, int64_t count) {
      for (int64_t i = offset; i < offset + count; ++i) {
        snapshot[static_cast<size_t>(i)] = m.grads()[i];
        ++reports[static_cast<size_t>(i)];
      }
    });
    const std::vector<float> losses = run_step(m);
    const std::string what =
        "tp " + std::to_string(p.tp) + (p.sp ? " sp" : "") + (p.lora ? " lora" : "");
    for (int64_t i = 0; i < m.num_params(); ++i) {
      ASSERT_EQ(reports[static_cast<size_t>(i)], 2) << what << ": element " << i;  // 2 backwards
      ASSERT_EQ(snapshot[static_cast<size_t>(i)], m.grads()[i]) << what << ": element " << i;
    }
    check_against_reference(ref, m, losses, tp, what);
    if (!p.sp) return;
    // Sequence parallel equals plain tp on the same ranks.
    Gpt plain(config, kBatch, TpContext{.comm = comm.get()});
    slice_from_full(plain.layout(), ref.model.layout(), ref.model.params(), plain.params());
    const std::vector<float> plain_losses = run_step(plain);
    for (size_t i = 0; i < losses.size(); ++i)
      EXPECT_NEAR(losses[i], plain_losses[i], 1e-5f * plain_losses[i]);
    expect_close(m.layout(), m.grads(), plain.grads(), what + " vs plain tp");
  });
  EXPECT_TRUE(AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpEquivalence,
                         ::testing::Values(Layout{2, false}, Layout{4, false}, Layout{2, true},
                                           Layout{4, true}, Layout{2, false, true},
                                           Layout{4, true, true}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.tp) +
                                  (info.param.sp ? "_sp" : "") + (info.param.lora ? "_lora" : "");
                         });

// A freshly initialised tp model starts from the tp = 1 weights: same loss at step 0.
TEST(TpInit, InitialisedShardsGiveTheTp1Loss) {
  TempDir dir;
  auto result = run_ranks(2, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 20000ms, "tp");
    Gpt ref(kCfg, kBatch);
    ref.initialize(21);
    Gpt m(kCfg, kBatch, TpContext{.comm = comm.get()});
    m.initialize(21);
    const Batch b = make_batch(5);
    const float want = ref.forward(b);
    EXPECT_NEAR(m.forward(b), want, 1e-5f * want);
  });
  EXPECT_TRUE(AllRanksOk(result));
}

// Every initialised shard, adapters included, is the slice of the tp = 1 initialisation.
TEST(TpInit, InitialisedShardsAreSlicesOfTheTp1Weights) {
  TempDir dir;
  auto result = run_ranks(2, 60s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 20000ms, "tp");
    const GptConfig config = with_lora(kCfg);
    Gpt ref(config, kBatch);
    ref.initialize(21);
    Gpt m(config, kBatch, TpContext{.comm = comm.get()});
    m.initialize(21);
    std::vector<float> want(static_cast<size_t>(m.num_params()));
    slice_from_full(m.layout(), ref.layout(), ref.params(), want.data());
    for (const ParamSpec& s : m.layout().specs()) {
      EXPECT_TRUE(std::equal(want.begin() + s.offset, want.begin() + s.offset + s.numel,
                             m.params() + s.offset))
          << s.name;
    }
  });
  EXPECT_TRUE(AllRanksOk(result));
}

}  // namespace
}  // namespace brigade::tp_equivalence_mp_test
