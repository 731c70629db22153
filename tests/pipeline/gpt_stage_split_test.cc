// GptStage's split backward (gpt_stage.h) in one process, against the same stage with the fused
// backward (split_backward = false), both holding the whole model or its middle blocks:
//   - the saved buffer is no larger (the W operands go over dead activations);
//   - after backward_input the input gradient (or, on a first stage, the embedding gradients) and
//     the layernorm gradients are bitwise the fused ones and the blocks' matmul weight and bias
//     gradients are still zero;
//   - after backward_weight every gradient is bitwise the fused one, also with two micro-batches
//     whose W both come after both B (as ZB-H1 runs them);
//   - the grad-ready hook (data parallelism's cue to average a range while backward runs)
//     reports every element exactly once, during the step's last backward, and each range it
//     reports already holds its final value: a snapshot taken in the hook equals the gradient
//     at the end of the step, for both backwards.
// The fused stage itself equals the single-process Gpt (gpt_pipeline_mp_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "brigade/model/gpt_stage.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

const GptConfig kCfg{.vocab = 29, .seq_len = 8, .d_model = 16, .n_layer = 3, .n_head = 2};
constexpr int64_t kMicroBatch = 2;
constexpr int kMicroBatches = 2;

struct Data {
  std::vector<int32_t> tokens, targets;
  Data() {
    const int64_t n = kMicroBatches * kMicroBatch * kCfg.seq_len;
    for (int64_t i = 0; i <= n; ++i) {
      const auto t = static_cast<int32_t>(random_uniform(3, 4, static_cast<uint64_t>(i)) *
                                          static_cast<float>(kCfg.vocab));
      if (i < n) tokens.push_back(t);
      if (i > 0) targets.push_back(t);
    }
  }
};

GptStage make_stage(int first, int end, bool split, const Data& data) {
  GptStage s(GptStageConfig{.model = kCfg,
                            .first_layer = first,
                            .end_layer = end,
                            .micro_batch = kMicroBatch,
                            .split_backward = split});
  s.initialize(5);
  std::vector<float> noise(static_cast<size_t>(s.num_params()));
  fill_normal(noise.data(), s.num_params(), 0.0f, 0.2f, 6, 7);
  for (int64_t i = 0; i < s.num_params(); ++i) s.params()[i] += noise[static_cast<size_t>(i)];
  s.set_batch(data.tokens.data(), data.targets.data(), kMicroBatches);
  s.zero_grads();
  return s;
}

// Records what the grad-ready hook reports: how often each element, and its value then.
struct ReadyLog {
  std::vector<int> times;
  std::vector<float> value;
  bool before_last = false;  // a report came before the step's last backward started
  explicit ReadyLog(GptStage& stage) : times(stage.num_params()), value(stage.num_params()) {
    stage.set_grad_ready_hook([this, &stage](int64_t offset, int64_t count) {
      for (int64_t i = offset; i < offset + count; ++i) {
        ++times[static_cast<size_t>(i)];
        value[static_cast<size_t>(i)] = stage.grads()[i];
      }
      before_last = before_last || !in_last;
    });
  }
  bool in_last = false;
  void expect_final(const std::vector<float>& want) const {
    EXPECT_FALSE(before_last) << "a range was reported before the last micro-batch";
    for (size_t i = 0; i < times.size(); ++i) {
      ASSERT_EQ(times[i], 1) << "element " << i << " reported " << times[i] << " times";
      ASSERT_EQ(value[i], want[i]) << "element " << i << " changed after it was reported";
    }
  }
};

bool in_block_matmul(const std::string& name) {
  return name.rfind("h.", 0) == 0 &&
         (name.find("c_attn") != std::string::npos || name.find("c_proj") != std::string::npos ||
          name.find("c_fc") != std::string::npos);
}

void check_stage(int first, int end) {
  SCOPED_TRACE("blocks [" + std::to_string(first) + ", " + std::to_string(end) + ")");
  const Data data;
  GptStage fused = make_stage(first, end, false, data);
  GptStage split = make_stage(first, end, true, data);
  ReadyLog fused_ready(fused), split_ready(split);
  ASSERT_EQ(split.saved_floats(), fused.saved_floats());
  const int64_t in_n = fused.input_floats(), out_n = fused.output_floats();

  // Inputs and output gradients per micro-batch (for a stage that is not first / not last).
  std::vector<std::vector<float>> input(kMicroBatches), dout(kMicroBatches);
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    input[mb].resize(static_cast<size_t>(in_n));
    dout[mb].resize(static_cast<size_t>(out_n));
    fill_normal(input[mb].data(), in_n, 0.0f, 1.0f, 8, static_cast<uint64_t>(mb));
    fill_normal(dout[mb].data(), out_n, 0.0f, 1e-2f, 9, static_cast<uint64_t>(mb));
  }
  const auto in_ptr = [&](int mb) { return in_n > 0 ? input[mb].data() : nullptr; };
  const auto dout_ptr = [&](int mb) { return out_n > 0 ? dout[mb].data() : nullptr; };
  std::vector<float> output(static_cast<size_t>(out_n));
  const auto out_ptr = [&] { return out_n > 0 ? output.data() : nullptr; };

  // Fused: F, B(+W) per micro-batch.
  std::vector<float> saved(static_cast<size_t>(fused.saved_floats()));
  std::vector<std::vector<float>> dinput_fused(kMicroBatches,
                                               std::vector<float>(static_cast<size_t>(in_n)));
  float loss_fused = 0.0f;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    fused_ready.in_last = mb == kMicroBatches - 1;
    loss_fused += fused.forward(mb, in_ptr(mb), out_ptr(), saved.data());
    fused.backward_input(mb, in_ptr(mb), dout_ptr(mb), in_n > 0 ? dinput_fused[mb].data() : nullptr,
                         saved.data());
    fused.backward_weight(mb, in_ptr(mb), saved.data());
  }
  const std::vector<float> want(fused.grads(), fused.grads() + fused.num_params());
  fused_ready.expect_final(want);

  // Split: F0 F1 B0 B1, then W0 W1.
  std::vector<std::vector<float>> saved_mb(
      kMicroBatches, std::vector<float>(static_cast<size_t>(split.saved_floats())));
  float loss = 0.0f;
  for (int mb = 0; mb < kMicroBatches; ++mb)
    loss += split.forward(mb, in_ptr(mb), out_ptr(), saved_mb[mb].data());
  EXPECT_EQ(loss, loss_fused);
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    split_ready.in_last = mb == kMicroBatches - 1;
    std::vector<float> dinput(static_cast<size_t>(in_n));
    split.backward_input(mb, in_ptr(mb), dout_ptr(mb), in_n > 0 ? dinput.data() : nullptr,
                         saved_mb[mb].data());
    EXPECT_EQ(dinput, dinput_fused[mb]) << "input gradient of mb " << mb;
  }
  int deferred = 0;
  for (const ParamSpec& s : split.layout().specs()) {
    const float* g = split.grads() + s.offset;
    if (in_block_matmul(s.name)) {
      EXPECT_TRUE(std::all_of(g, g + s.numel, [](float v) { return v == 0.0f; }))
          << s.name << " before W";
      ++deferred;
    } else {
      EXPECT_TRUE(std::equal(g, g + s.numel, want.begin() + s.offset)) << s.name << " after B";
    }
  }
  EXPECT_EQ(deferred, 8 * (end - first));
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    split_ready.in_last = mb == kMicroBatches - 1;
    split.backward_weight(mb, in_ptr(mb), saved_mb[mb].data());
  }
  split_ready.expect_final(want);
  for (const ParamSpec& s : split.layout().specs()) {
    const float* g = split.grads() + s.offset;
    EXPECT_TRUE(std::any_of(want.begin() + s.offset, want.begin() + s.offset + s.numel,
                            [](float v) { return v != 0.0f; }))
        << s.name;
    EXPECT_TRUE(std::equal(g, g + s.numel, want.begin() + s.offset)) << s.name << " after W";
  }
}

TEST(GptStageSplit, WholeModel) {
  check_stage(0, kCfg.n_layer);
}
TEST(GptStageSplit, MiddleBlocks) {
  check_stage(1, 2);
}
TEST(GptStageSplit, FirstAndLast) {
  check_stage(0, 1);
  check_stage(1, kCfg.n_layer);
}

}  // namespace
}  // namespace brigade
