// The low-communication sync methods (sync.method, sync/replica_sync.h) driven by the real
// trainer through `brigade launch --nproc 2`, on the small GPT of dp_run_helpers.h and the
// default fortunes corpus:
//   - DiLoCo with H = 1, inner SGD, outer lr 1 and momentum 0 trains exactly as DDP with SGD
//     (the mean of the replicas' SGD steps is the SGD step on the mean gradient);
//   - every method and payload lowers the loss well below the uniform-prediction loss ln 256,
//     and every step's measured bytes (CommStats) equal the method's formula;
//   - a run stopped (run.stop_after) in the middle of a DiLoCo round, or under DeMo/PowerSGD,
//     and resumed ends bitwise where the uninterrupted run ends;
//   - a resume on a different number of processes is refused with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "parallel/dp_run_helpers.h"

namespace brigade::testing {
namespace {

class ReplicaSyncRuns : public DpRuns {
 protected:
  static std::vector<nlohmann::json> step_records(const std::string& run) {
    std::vector<nlohmann::json> out;
    std::ifstream in(run + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("tokens_per_s")) out.push_back(j);
    }
    return out;
  }

  static int64_t num_params(const std::string& ckpt) {
    int64_t n = 0;
    for (const auto& [name, t] : read_checkpoint(ckpt, CkptPart::kModel)) {
      n += static_cast<int64_t>(t.data.size());
    }
    return n;
  }
};

// SGD with a learning rate large enough to move the weights far in 20 steps; no clipping (DDP
// clips the mean gradient, replicas clip their own) and no momentum, as the issue states it.
const char* kSgd =
    " --set train.optimizer=sgd --set train.momentum=0.0 --set train.grad_clip=0.0"
    " --set train.lr=0.5 --set train.min_lr=0.05";

// Tolerance: DiLoCo averages the replicas' new weights (theta - lr g_r) where DDP averages the
// gradients first; in f32 the two differ by rounding (~1e-7 relative per step), so we ask for
// the weights to agree to 1e-5 of the largest weight and each step's loss to 1e-5 relative, as
// the DDP equivalence tests do.
TEST_F(ReplicaSyncRuns, DilocoWithOneInnerStepEqualsDdpWithSgd) {
  std::string ddp = run("ddp", 2, kSgd);
  std::string diloco = run("diloco", 2,
                           std::string(kSgd) +
                               " --set sync.method=diloco --set sync.inner_steps=1"
                               " --set sync.outer_lr=1.0 --set sync.outer_momentum=0.0");
  auto la = losses(ddp), lb = losses(diloco);
  ASSERT_EQ(la.size(), 20u);
  ASSERT_EQ(lb.size(), 20u);
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_LE(std::abs(la[i] - lb[i]), 1e-5 * la[i]) << "step " << i + 1;
  }
  EXPECT_LT(la.back(), la.front() - 1.0) << "SGD must move the weights for the test to mean much";
  const std::string ckpt = "/checkpoints/step_00000020";
  expect_same_file(ddp + ckpt, diloco + ckpt, "model.safetensors", /*per_tensor=*/false);
}

struct MethodCase {
  const char* name;
  const char* settings;
};

class EveryMethod : public ReplicaSyncRuns, public ::testing::WithParamInterface<MethodCase> {};

// Each method trains and its bytes are exactly the formula's. A model that learned nothing stays
// at the uniform loss ln 256 = 5.55 (the initial weights are small); after 20 steps every method
// must be at least 0.5 nats below it (measured: DiLoCo ~3.4, PowerSGD ~4.05, EF-signSGD ~4.45,
// DeMo ~4.55-4.63, top-k 2% bf16 ~4.69: the sign and sparse methods start slower).
TEST_P(EveryMethod, LowersTheLossAndSendsTheFormulaBytes) {
  const MethodCase& c = GetParam();
  std::string r = run(c.name, 2, std::string(" --set train.steps=20 ") + c.settings);
  const double val = final_val_loss(r);
  EXPECT_GT(val, 0);
  EXPECT_LT(val, std::log(256.0) - 0.5) << c.name;
  auto steps = step_records(r);
  ASSERT_EQ(steps.size(), 20u);
  for (const auto& s : steps) {
    ASSERT_TRUE(s.contains("comm_formula_sent_bytes")) << s.dump();
    EXPECT_EQ(s["comm_sent_bytes"].get<int64_t>(), s["comm_formula_sent_bytes"].get<int64_t>())
        << c.name << " step " << s["step"];
    EXPECT_EQ(s["comm_recv_bytes"].get<int64_t>(), s["comm_formula_recv_bytes"].get<int64_t>())
        << c.name << " step " << s["step"];
    EXPECT_GT(s["comm_sent_bytes"].get<int64_t>(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Methods, EveryMethod,
    ::testing::Values(
        MethodCase{"diloco_f32", "--set sync.method=diloco --set sync.inner_steps=4"},
        MethodCase{"diloco_int8_streaming",
                   "--set sync.method=diloco --set sync.inner_steps=4 --set sync.payload=int8 "
                   "--set sync.fragments=2 --set sync.int8_chunk=4096"},
        MethodCase{"diloco_dct_1bit",
                   "--set sync.method=diloco --set sync.inner_steps=4 --set sync.payload=dct_topk "
                   "--set sync.dct_k=8 --set sync.dct_values=1bit"},
        MethodCase{"diloco_1bit",
                   "--set sync.method=diloco --set sync.inner_steps=4 --set sync.payload=1bit"},
        MethodCase{"demo_f32", "--set sync.method=demo --set sync.demo_k=8"},
        MethodCase{"demo_1bit",
                   "--set sync.method=demo --set sync.demo_k=8 --set sync.payload=1bit"},
        MethodCase{"powersgd", "--set sync.method=powersgd --set sync.powersgd_rank=2"},
        MethodCase{"signef", "--set sync.method=signef"},
        MethodCase{"topk_bf16",
                   "--set sync.method=topk --set sync.topk_fraction=0.02 --set sync.payload=bf16"}),
    [](const auto& info) { return std::string(info.param.name); });

// The outer step of DiLoCo with f32 pseudo-gradients is one ring all-reduce of the whole model:
// on 2 ranks each sends half of it twice (reduce-scatter, all-gather), 4n bytes in all. Checked
// against the parameter count of the checkpoint, independently of the method's own formula.
TEST_F(ReplicaSyncRuns, DilocoOuterStepSendsTheModelOnce) {
  std::string r =
      run("bytes", 2, "--set train.steps=8 --set sync.method=diloco --set sync.inner_steps=4");
  const int64_t n = num_params(r + "/checkpoints/step_00000008");
  auto steps = step_records(r);
  ASSERT_EQ(steps.size(), 8u);
  const int64_t inner = steps[0]["comm_sent_bytes"].get<int64_t>();  // loss + norm scalars
  for (const auto& s : steps) {
    const int64_t step = s["step"].get<int64_t>();
    const int64_t expected = step % 4 == 0 ? inner + 4 * n : inner;
    EXPECT_EQ(s["comm_sent_bytes"].get<int64_t>(), expected) << "step " << step;
  }
}

// With sync.payload = dct_topk (k = 8 per chunk of <= 64 x 64, 1-bit values) an outer step
// sends one compressed payload to the other replica: under n / 16 bytes where f32 sends 4n and
// int8 more than n. Only outer steps send more than the per-step scalars.
TEST_F(ReplicaSyncRuns, DilocoDctOuterStepSendsACompressedPayload) {
  std::string r = run("dct_bytes", 2,
                      "--set train.steps=8 --set sync.method=diloco --set sync.inner_steps=4 "
                      "--set sync.payload=dct_topk --set sync.dct_k=8 --set sync.dct_values=1bit");
  const int64_t n = num_params(r + "/checkpoints/step_00000008");
  auto steps = step_records(r);
  ASSERT_EQ(steps.size(), 8u);
  const int64_t inner = steps[0]["comm_sent_bytes"].get<int64_t>();
  for (const auto& s : steps) {
    const int64_t step = s["step"].get<int64_t>();
    const int64_t sent = s["comm_sent_bytes"].get<int64_t>();
    if (step % 4 != 0) {
      EXPECT_EQ(sent, inner) << "step " << step;
    } else {
      EXPECT_GT(sent, inner) << "step " << step;
      EXPECT_LT(sent - inner, n / 16) << "step " << step;
    }
  }
}

class StopResume : public ReplicaSyncRuns, public ::testing::WithParamInterface<MethodCase> {};

// Stopped after step 5 (inside a DiLoCo round of H = 3: the replicas' weights and inner AdamW
// states differ) and resumed, the run ends with bitwise the weights and state of the run that
// never stopped.
TEST_P(StopResume, ResumedRunEqualsUninterrupted) {
  const MethodCase& c = GetParam();
  const std::string common = std::string(" --set train.steps=10 ") + c.settings;
  std::string whole = run(std::string(c.name) + "_whole", 2, common);
  std::string part = run(std::string(c.name) + "_part", 2, common + " --set run.stop_after=5");
  ASSERT_TRUE(std::ifstream(part + "/checkpoints/step_00000005/manifest.json").good());
  run(std::string(c.name) + "_part", 2, common);
  const std::string ckpt = "/checkpoints/step_00000010";
  expect_same_file(whole + ckpt, part + ckpt, "model.safetensors", false, /*tol=*/0.0);
  expect_same_file(whole + ckpt, part + ckpt, "optimizer.safetensors", true, /*tol=*/0.0);
  EXPECT_EQ(final_val_loss(whole), final_val_loss(part));
}

INSTANTIATE_TEST_SUITE_P(
    Methods, StopResume,
    ::testing::Values(
        MethodCase{"diloco", "--set sync.method=diloco --set sync.inner_steps=3"},
        MethodCase{"diloco_streaming",
                   "--set sync.method=diloco --set sync.inner_steps=4 --set sync.fragments=2 "
                   "--set sync.payload=int8"},
        MethodCase{"diloco_dct",
                   "--set sync.method=diloco --set sync.inner_steps=3 --set sync.payload=dct_topk "
                   "--set sync.dct_k=8 --set sync.dct_values=bf16"},
        MethodCase{"diloco_1bit",
                   "--set sync.method=diloco --set sync.inner_steps=3 --set sync.payload=1bit "
                   "--set sync.sign_block=64"},
        MethodCase{"demo", "--set sync.method=demo --set sync.demo_k=8"},
        MethodCase{"powersgd", "--set sync.method=powersgd --set sync.powersgd_rank=2"}),
    [](const auto& info) { return std::string(info.param.name); });

// Replica-local state cannot be re-split: resuming a 2-replica DiLoCo run on 1 process is
// refused by the launcher before any worker starts (exit 2), naming both sizes, and the remedy
// the message gives (a new run from the checkpoint's weights) works as written.
TEST_F(ReplicaSyncRuns, ResumeOnAnotherProcessCountIsRefused) {
  const std::string common =
      " --set train.steps=10 --set sync.method=diloco --set sync.inner_steps=3";
  run("resize", 2, common + " --set run.stop_after=4");
  std::string out = dir_ + "/resize";
  std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 1 -- train " + config_ +
                    " --set run.out_dir=" + out + common;
  auto r = run_command(cmd, 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("sync.method = \"diloco\" on 2 replicas"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on 1"), std::string::npos) << r.output;
  const std::string marker = "--set train.init_from=";
  const size_t at = r.output.find(marker);
  ASSERT_NE(at, std::string::npos) << r.output;
  const size_t end = r.output.find_first_of(" \n", at + marker.size());
  const std::string source = r.output.substr(at + marker.size(), end - at - marker.size());
  auto remedy = run_command(cmd + " --set run.name=NEW --set train.init_from=" + source, 120);
  EXPECT_EQ(remedy.exit_code, 0) << remedy.output;
}

}  // namespace
}  // namespace brigade::testing
