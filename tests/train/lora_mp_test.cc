// LoRA adapters (issue 18, fine-tuning), end to end through the CLI: a LoRA run from a base run
// (train.init_from) trains its adapters only, the base tensors leaving it bitwise as they came
// in; its first loss is the base model's bitwise (lora_B starts at zero); two data-parallel
// processes, ZeRO-1 and ZeRO-3, two pipeline stages (1F1B and the zero-bubble zb-h1, whose split
// backward adds the adapters' gradients in W) and two tensor-parallel ranks (with and
// without sequence parallelism, and tp x dp under ZeRO-1) equal one process; `brigade export`
// merges the adapters into a plain GPT-2 whose validation loss, imported back, is the adapted
// model's; what adapters do not support (mixture-of-experts blocks) is refused before anything
// starts.
//
// Tolerance, as the data-parallel equivalence tests (parallel/dp_run_helpers.h): losses within
// 1e-5 relative at every step, weights within 1e-5 of the largest weight; the merged model's
// loss within 1e-5 relative (W + s B A rounds differently from W x + s (x A^T) B^T).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "brigade/ckpt/safetensors.h"
#include "brigade/model/lora.h"
#include "common/checkpoint_tensors.h"
#include "common/fine_tune_suite.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/same_training.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::CkptPart;
using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::read_checkpoint;
using testing::run_command;
using testing::WholeTensor;

// Rank 4 on all four layers of the tiny GPT (C = 32, 2 blocks): per block
// 4 * ((32 + 96) + (32 + 32) + (32 + 128) + (128 + 32)) = 2,048 adapter parameters.
constexpr const char* kLora =
    "--set lora.rank=4 --set lora.alpha=8 "
    "--set 'lora.targets=[\"attn.c_attn\", \"attn.c_proj\", \"mlp.c_fc\", \"mlp.c_proj\"]'";
constexpr int64_t kAdapterParams = 2 * 2'048;

struct LoraMethod {
  static constexpr const char* kName = "lora";
  static constexpr const char* kArgs = kLora;
};

class Lora : public testing::FineTuneSuite<LoraMethod> {
 protected:
  // Base tensors bitwise the source's, every adapter trained (lora_B away from zero, lora_A away
  // from its initialisation), and the analytic number of adapter parameters.
  static void expect_adapters_only(const std::string& name) {
    SCOPED_TRACE(name);
    const auto now = read_checkpoint(final_ckpt(name), CkptPart::kModel);
    ASSERT_EQ(now.size(), source_.size() + 2 * 4 * 2);  // A and B of 4 layers in 2 blocks
    int64_t adapter_params = 0;
    for (const auto& [tensor, t] : now) {
      if (!is_lora_tensor(tensor)) {
        ASSERT_TRUE(source_.count(tensor)) << tensor;
        EXPECT_TRUE(t.data == source_.at(tensor).data) << tensor << " changed though frozen";
        continue;
      }
      adapter_params += static_cast<int64_t>(t.data.size());
      if (tensor.find(".lora_B.") != std::string::npos) {
        EXPECT_TRUE(std::any_of(t.data.begin(), t.data.end(), [](float x) { return x != 0.0f; }))
            << tensor << " did not train";
      }
    }
    EXPECT_EQ(adapter_params, kAdapterParams);
  }

  // `brigade eval` of a run's newest checkpoint on 4 validation batches: its loss.
  static double eval_loss(const std::string& run) {
    const std::string out = dir_ + "/" + run + "-eval.json";
    const auto r = brigade("eval --ckpt " + dir_ + "/" + run + " --batches 4 --json " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(out);
    EXPECT_TRUE(in.good()) << r.output;
    return in.good() ? nlohmann::json::parse(in).at("loss").get<double>() : -1.0;
  }
};

TEST_F(Lora, OnlyTheAdaptersTrainAndTheFirstLossIsTheBaseModels) {
  const std::string out = fine_tune("one", "");
  EXPECT_THAT(out, HasSubstr("train.freeze: 34,688 of 38,784 parameters frozen (28 tensors); "
                             "4,096 trainable"));
  expect_adapters_only("one");
  // lora_B = 0: the first step's loss is the base model's on the same batch, bitwise.
  train("plain", "--set train.init_from=" + dir_ + "/source --set train.steps=4");
  const auto lora = per_step("one"), plain = per_step("plain");
  ASSERT_EQ(lora.size(), 4u);
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_EQ(lora[0], plain[0]);
  EXPECT_NE(lora[3], plain[3]);
}

TEST_F(Lora, DataParallelZeroAndPipelineEqualOneProcess) {
  fine_tune("one-dp", "");
  fine_tune("dp2", "--set train.micro_batch=4", 2);
  expect_adapters_only("dp2");
  expect_same_training("one-dp", "dp2");
  for (int stage : {1, 3}) {
    const std::string name = "zero" + std::to_string(stage);
    fine_tune(name, "--set train.micro_batch=4 --set parallel.zero=" + std::to_string(stage), 2);
    expect_adapters_only(name);
    expect_same_training("one-dp", name);
  }
  fine_tune("pp2", "--set parallel.pp=2 --set train.micro_batch=4 --set train.grad_accum=2", 2);
  expect_adapters_only("pp2");
  expect_same_training("one-dp", "pp2");
  fine_tune("zb",
            "--set parallel.pp=2 --set parallel.schedule=zb-h1 --set train.micro_batch=4 "
            "--set train.grad_accum=2",
            2);
  expect_adapters_only("zb");
  expect_same_training("one-dp", "zb");
}

// Tensor parallelism cuts each adapter as its layer (B's rows for the column-parallel c_attn and
// c_fc, A's columns for the row-parallel c_projs) and sums the partial products over the tp
// ranks: the same training as one process, with and without sequence parallelism.
TEST_F(Lora, TensorParallelEqualsOneProcess) {
  fine_tune("one-tp", "");
  fine_tune("tp2", "--set parallel.tp=2", 2);
  expect_adapters_only("tp2");
  expect_same_training("one-tp", "tp2");
  fine_tune("tp2-sp", "--set parallel.tp=2 --set parallel.sequence_parallel=true", 2);
  expect_same_training("one-tp", "tp2-sp");
  // tp 2 x dp 2 under ZeRO-1: two replicas of micro-batch 8 = one process accumulating two.
  fine_tune("one-ga2", "--set train.grad_accum=2");
  fine_tune("tp2-dp2", "--set parallel.tp=2 --set parallel.zero=1", 4);
  expect_same_training("one-ga2", "tp2-dp2");
}

TEST_F(Lora, MergedExportGivesTheAdaptedModelsLoss) {
  fine_tune("tuned", "");
  const std::string hf = dir_ + "/hf";
  const auto e = brigade("export --ckpt " + dir_ + "/tuned --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_THAT(e.output, HasSubstr("LoRA adapters of rank 4 merged"));
  const SafetensorsFile file = SafetensorsFile::open(hf + "/model.safetensors");
  EXPECT_TRUE(file.contains("transformer.h.0.attn.c_attn.weight"));
  for (const std::string& name : file.names()) EXPECT_FALSE(is_lora_tensor(name)) << name;
  // Imported as a plain GPT-2 (the base config, no [lora]).
  const auto i = brigade("import --from " + hf + " --config " + config_ +
                         " --set run.out_dir=" + dir_ + " --set run.name=merged");
  ASSERT_EQ(i.exit_code, 0) << i.output;
  const double adapted = eval_loss("tuned"), merged = eval_loss("merged"),
               base = eval_loss("source");
  EXPECT_NEAR(merged, adapted, 1e-5 * adapted);
  EXPECT_GT(std::abs(base - adapted), 1e-4) << "the adapters changed nothing";
}

// `brigade export --lora peft`: the base GPT-2 plus the adapters as PEFT saves them. The test
// applies them as PEFT does (fan_in_fan_out: the Conv1D weight (in, out) gains (s B A)^T, in
// double) and must find the merged export's weights.
std::vector<float> read_all(const SafetensorsFile& f, const std::string& name) {
  std::vector<float> v(static_cast<size_t>(f.info(name).numel()));
  f.read_f32(name, v.data(), static_cast<int64_t>(v.size()));
  return v;
}

TEST_F(Lora, PeftExportAppliedAsPeftDoesGivesTheMergedWeights) {
  fine_tune("for-peft", "");
  const std::string merged = dir_ + "/for-peft-merged", peft = dir_ + "/for-peft-peft";
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/for-peft --out " + merged).exit_code, 0);
  const auto e = brigade("export --ckpt " + dir_ + "/for-peft --out " + peft + " --lora peft");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_THAT(e.output, HasSubstr("PeftModel.from_pretrained"));

  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(peft + "/adapter_config.json"));
  EXPECT_EQ(cfg.at("peft_type"), "LORA");
  EXPECT_EQ(cfg.at("r"), 4);
  EXPECT_EQ(cfg.at("lora_alpha").get<double>(), 8.0);
  EXPECT_EQ(cfg.at("fan_in_fan_out"), true);
  EXPECT_EQ(cfg.at("target_modules"),
            nlohmann::json({"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}));
  const double s = cfg.at("lora_alpha").get<double>() / cfg.at("r").get<double>();

  const SafetensorsFile adapters = SafetensorsFile::open(peft + "/adapter_model.safetensors");
  const SafetensorsFile base = SafetensorsFile::open(peft + "/model.safetensors");
  const SafetensorsFile want = SafetensorsFile::open(merged + "/model.safetensors");
  EXPECT_EQ(adapters.names().size(), 2u * 4 * 2);  // A and B, 4 layers, 2 blocks
  for (const std::string& name : base.names()) EXPECT_FALSE(is_lora_tensor(name)) << name;
  int adapted = 0;
  for (const std::string& name : want.names()) {
    std::vector<double> w(static_cast<size_t>(base.info(name).numel()));
    const std::vector<float> b = read_all(base, name);
    std::copy(b.begin(), b.end(), w.begin());
    const std::string layer = name.substr(0, name.size() - std::string(".weight").size());
    const std::string a_name = "base_model.model." + layer + ".lora_A.weight";
    if (name.size() > 7 && adapters.contains(a_name)) {
      const std::vector<float> A = read_all(adapters, a_name);
      const std::vector<float> B =
          read_all(adapters, "base_model.model." + layer + ".lora_B.weight");
      const int64_t in = base.info(name).shape[0], out = base.info(name).shape[1];
      ASSERT_EQ(adapters.info(a_name).shape, (std::vector<int64_t>{4, in})) << a_name;
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) {
          double d = 0;
          for (int64_t k = 0; k < 4; ++k) d += static_cast<double>(B[o * 4 + k]) * A[k * in + i];
          w[static_cast<size_t>(i * out + o)] += s * d;
        }
      ++adapted;
    }
    const std::vector<float> m = read_all(want, name);
    double scale = 0, diff = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(m[i])));
      diff = std::max(diff, std::abs(w[i] - m[i]));
    }
    EXPECT_LE(diff, 1e-6 * scale + 1e-7) << name;
  }
  EXPECT_EQ(adapted, 8);
  // A merged export into the same folder removes the adapters (PEFT would add them twice).
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/for-peft --out " + peft).exit_code, 0);
  EXPECT_FALSE(std::ifstream(peft + "/adapter_config.json").good());
  // A run without adapters has none to export.
  const auto none =
      brigade("export --ckpt " + dir_ + "/source --out " + dir_ + "/plain-peft --lora peft");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_THAT(none.output, HasSubstr("no LoRA adapters"));
}

TEST_F(Lora, UnsupportedLayoutsAreRefusedBeforeAnythingStarts) {
  const std::string base =
      "train " + config_ + " --set run.out_dir=" + dir_ + " " + kLora + " --set run.name=";
  const auto moe = brigade(base + "moe --set model.n_experts=4");
  EXPECT_EQ(moe.exit_code, 2) << moe.output;
  EXPECT_THAT(moe.output, HasSubstr("model.n_experts = 4"));
  const auto typo = brigade(base + "typo --set lora.targets=mlp.fc");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output, HasSubstr("lora.targets = \"mlp.fc\""));
  for (const char* run : {"moe", "typo"}) {
    EXPECT_FALSE(std::ifstream(dir_ + "/" + std::string(run) + "/metrics.jsonl").good()) << run;
  }
}

}  // namespace
}  // namespace brigade
