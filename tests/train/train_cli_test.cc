// End-to-end tests of `brigade train` / `generate` / `tokenize` as a user runs them: a real
// process per run, the run folder on disk, exit codes and messages checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "brigade/base/file_io.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/kernel_isa.h"
#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade::train_cli_test {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;
using ::testing::Not;
using testing::run_command;

// A GPT small enough to train 20 steps in a couple of seconds.
const std::string kTinyConfig = testing::tiny_gpt_config({{"train.ckpt_every", "10"}});

// The final validation loss of a finished run.
double final_val_loss(const std::string& root) {
  std::ifstream metrics(root + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(metrics, line)) last = line;
  return nlohmann::json::parse(last)["val_loss"].get<double>();
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("train-cli");
    ASSERT_FALSE(dir_.empty());
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << kTinyConfig;
  }
  testing::CommandResult brigade(const std::string& args, const std::string& env = "") {
    return run_command("env " + env + " " + std::string(BRIGADE_BINARY) + " " + args);
  }
  testing::CommandResult train(const std::string& out, const std::string& extra = "",
                               const std::string& env = "") {
    return brigade("train " + config_ + " --set run.out_dir=" + dir_ + "/" + out + " " + extra,
                   env);
  }
  std::string ckpt(const std::string& out, int step) {
    char name[32];
    std::snprintf(name, sizeof(name), "step_%08d", step);
    return dir_ + "/" + out + "/tiny/checkpoints/" + name;
  }
  std::string dir_, config_;
};

TEST_F(TrainCli, ResumeIsBitwiseIdenticalToAnUninterruptedRun) {
  auto straight = train("a");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  auto first = train("b", "--set run.stop_after=10");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_THAT(first.output, HasSubstr("stopped after step 10"));
  auto second = train("b");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("resumed from"));
  for (auto part : {testing::CkptPart::kModel, testing::CkptPart::kState}) {
    const auto a = testing::read_checkpoint(ckpt("a", 20), part);
    const auto b = testing::read_checkpoint(ckpt("b", 20), part);
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "the straight and the resumed run differ";
  }
  // And the comparison can fail: step 10 differs from step 20.
  EXPECT_FALSE(testing::read_checkpoint(ckpt("a", 10), testing::CkptPart::kModel) ==
               testing::read_checkpoint(ckpt("a", 20), testing::CkptPart::kModel));
}

// run.resume = "never" on a folder that holds a run would replace its `latest` and append to
// its metrics: refused before any training, naming the folder and the ways out; the old run's
// files are untouched. On a fresh folder it trains.
TEST_F(TrainCli, ResumeNeverRefusesToOverwriteARun) {
  ASSERT_EQ(train("a", "--set run.stop_after=10").exit_code, 0);
  const std::string metrics = dir_ + "/a/tiny/metrics.jsonl";
  const std::string before = read_file(metrics);
  auto again = train("a", "--set run.resume=never");
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("run.resume = \"never\": " + dir_ +
                                      "/a/tiny already holds "
                                      "a run (checkpoints/latest)"));
  EXPECT_THAT(again.output, HasSubstr("run.resume = \"auto\" to continue it"));
  EXPECT_EQ(read_file(metrics), before);
  auto fresh = train("fresh", "--set run.resume=never --set train.steps=2 --set train.warmup=1");
  EXPECT_EQ(fresh.exit_code, 0) << fresh.output;
}

TEST_F(TrainCli, NonFiniteLossStopsNamingTheStepAndKeepsTheLastCheckpoint) {
  auto r = train("nan", "", "BRIGADE_FAULT_NAN_STEP=15");
  EXPECT_EQ(r.exit_code, 6) << r.output;
  EXPECT_THAT(r.output, HasSubstr("at step 15"));
  EXPECT_THAT(r.output, HasSubstr("step_00000010"));
  std::string latest = read_file(dir_ + "/nan/tiny/checkpoints/latest");
  EXPECT_THAT(latest, HasSubstr("step_00000010"));
  // The kept checkpoint still verifies: generating from it works.
  auto g = brigade("generate --ckpt " + ckpt("nan", 10) + " --prompt Hi --tokens 5");
  EXPECT_EQ(g.exit_code, 0) << g.output;
}

TEST_F(TrainCli, NonFiniteLossCanBeSkipped) {
  auto r = train("skip", "--set train.on_nonfinite=skip", "BRIGADE_FAULT_NAN_STEP=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("at step 5; skipping"));
  std::ifstream metrics(dir_ + "/skip/tiny/metrics.jsonl");
  std::string line;
  int skipped = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("skipped") && j["skipped"].get<bool>()) {
      EXPECT_EQ(j["step"].get<int>(), 5);
      ++skipped;
    }
  }
  EXPECT_EQ(skipped, 1);
}

TEST_F(TrainCli, InvalidConfigExitsWithCode2BeforeAnyWork) {
  auto r = train("bad", "--set model.n_head=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("model.n_head = 3"));
  EXPECT_THAT(run_command("test -e " + dir_ + "/bad").exit_code, Not(0));
  auto unknown = train("bad", "--set train.stepz=3");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("train.stepz"));
}

TEST_F(TrainCli, TrainsOnAContextShorterThanTheModels) {
  auto r = train("short", "--set data.seq_len=16 --set train.steps=3 --set train.ckpt_every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("of 16 tokens"));
}

TEST_F(TrainCli, MissingDataFileNamesThePath) {
  auto r = train("missing", "--set data.source=text --set data.path=/nonexistent/corpus.txt");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/corpus.txt"));
}

TEST_F(TrainCli, RunFolderHoldsConfigManifestMetricsAndGenerateSamples) {
  auto r = train("full");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string root = dir_ + "/full/tiny";
  auto manifest = nlohmann::json::parse(read_file(root + "/manifest.json"));
  EXPECT_EQ(manifest["git_commit"].get<std::string>().size(), 40u);
  EXPECT_FALSE(manifest["data_files"].empty());
  EXPECT_FALSE(manifest["cpu"].get<std::string>().empty());
  EXPECT_THAT(read_file(root + "/config.toml"), HasSubstr("d_model = 32"));
  std::ifstream metrics(root + "/metrics.jsonl");
  std::string line, last;
  int steps = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("tokens_per_s")) ++steps;
    last = line;
  }
  EXPECT_EQ(steps, 20);
  auto final_record = nlohmann::json::parse(last);
  ASSERT_TRUE(final_record.value("final", false));
  // 20 steps already beat a uniform byte model (8 bits/byte).
  EXPECT_LT(final_record["val_bits_per_byte"].get<double>(), 6.5);

  auto g = brigade("generate --ckpt " + root + " --prompt 'The ' --tokens 30 --seed 3");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_EQ(g.output.rfind("The ", 0), 0u) << g.output;
  EXPECT_GT(g.output.size(), 20u);
}

// train.kernels picks the GEMM library; train.log and the manifest name it, with its version and
// thread count, and both train the same model to about the same loss (they round differently).
TEST_F(TrainCli, GemmBackendComesFromTheConfigAndIsLogged) {
  double final_loss[2] = {0, 0};
  int i = 0;
  for (const std::string backend : {"onednn", "openblas"}) {
    auto r = train(backend, backend == "onednn" ? "" : "--set train.kernels=" + backend);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string root = dir_ + "/" + backend + "/tiny";
    const std::string log = read_file(root + "/train.log");
    EXPECT_THAT(log, HasSubstr("kernels: GEMMs on " + backend + " ("));
    EXPECT_THAT(log, HasSubstr(backend == "onednn" ? "oneDNN 2." : "OpenBLAS"));
    EXPECT_THAT(log, HasSubstr(", 1 thread)"));
    // The element-wise kernels' ISA, on the same line.
    const std::string isa = kernel_isa_name(elementwise_isa());
    EXPECT_THAT(log, HasSubstr("; element-wise " + isa));
    auto manifest = nlohmann::json::parse(read_file(root + "/manifest.json"));
    EXPECT_EQ(manifest["kernels"].get<std::string>().rfind(backend + " (", 0), 0u);
    EXPECT_EQ(manifest["elementwise_isa"], isa);
    EXPECT_THAT(read_file(root + "/config.toml"), HasSubstr("kernels = \"" + backend + "\""));
    final_loss[i++] = final_val_loss(root);
  }
  // Same data, same initialisation, 20 steps: only float rounding separates the two runs.
  EXPECT_NEAR(final_loss[0], final_loss[1], 1e-3 * final_loss[1]);
  auto bad = train("bad", "--set train.kernels=mkl");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("train.kernels"));
}

// train.precision = "bf16" runs on every CPU and both backends, and train.log's kernels line says
// how: natively where oneDNN has AVX512_BF16, else (oneDNN capped below it with its own
// DNNL_MAX_CPU_ISA, as on an AVX2-only CPU or one without AVX512_BF16; OpenBLAS always) as f32
// GEMMs of the rounded operands, the same products, so the runs end at the same loss up to the
// order of the sums.
TEST_F(TrainCli, Bf16RunsOnEveryCpuAndBackendAndSaysHowItMultiplies) {
  const char* in_f32 = "bf16 operands multiplied by the f32 GEMM";
  auto r = train("bf16", "--set train.precision=bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string log = read_file(dir_ + "/bf16/tiny/train.log");
  EXPECT_THAT(log, HasSubstr("1 thread, bf16 operands"));
  if (bf16_gemm_is_native()) {
    EXPECT_THAT(log, Not(HasSubstr(in_f32)));
  }
  const double reference = final_val_loss(dir_ + "/bf16/tiny");
  for (const auto& [out, extra, env] : {
           std::tuple<std::string, std::string, std::string>{"avx2", "", "DNNL_MAX_CPU_ISA=AVX2"},
           {"avx512", "", "DNNL_MAX_CPU_ISA=AVX512_CORE"},
           {"openblas", "--set train.kernels=openblas", ""},
       }) {
    SCOPED_TRACE(out);
    auto capped = train(out, "--set train.precision=bf16 " + extra, env);
    ASSERT_EQ(capped.exit_code, 0) << capped.output;
    EXPECT_THAT(read_file(dir_ + "/" + out + "/tiny/train.log"), HasSubstr(in_f32));
    // 20 steps of the same products summed in another order (the backend test's tolerance).
    EXPECT_NEAR(final_val_loss(dir_ + "/" + out + "/tiny"), reference, 1e-3 * reference);
  }
}

// A mistyped subcommand is named with the nearest one (exit 2), not "a subcommand is
// required"; a word far from every subcommand gets the list only. --version names the commit of
// this checkout, the build type and the libraries with their versions.
TEST_F(TrainCli, MistypedSubcommandSuggestsTheNearestAndVersionNamesTheBuild) {
  auto typo = brigade("trian " + config_);
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output, HasSubstr("unknown subcommand 'trian'; did you mean 'train'?"));
  auto far = brigade("frobnicate");
  EXPECT_EQ(far.exit_code, 2) << far.output;
  EXPECT_THAT(far.output, Not(HasSubstr("did you mean")));
  EXPECT_THAT(far.output, HasSubstr("check-config"));
  auto v = brigade("--version");
  EXPECT_EQ(v.exit_code, 0) << v.output;
  const std::string head =
      run_command("git -C " + std::string(BRIGADE_SOURCE_DIR) + " rev-parse HEAD").output;
  EXPECT_THAT(v.output, HasSubstr("commit " + head.substr(0, head.find('\n'))));
  for (const char* s : {"oneDNN 2.", "OpenBLAS", "Gloo 0.", "protobuf 3."}) {
    EXPECT_THAT(v.output, HasSubstr(s)) << v.output;
  }
}

TEST_F(TrainCli, TokenizeWritesShardsThatTrainWithTheirBpe) {
  std::string shards = dir_ + "/shards";
  auto t = brigade("tokenize --out " + shards + " --vocab 300");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto r = train("bpe", "--set data.source=shards --set data.path=" + shards +
                            " --set model.vocab=300 --set train.steps=4 --set train.ckpt_every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(ShardedCheckpointReader::open(ckpt("bpe", 4)).contains("tokenizer.bpe"));
  auto g = brigade("generate --ckpt " + ckpt("bpe", 4) + " --prompt Hello --tokens 10");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  // A vocabulary too small for the shards is a config error naming the key.
  auto small = train("bpe2", "--set data.source=shards --set data.path=" + shards);
  EXPECT_EQ(small.exit_code, 2) << small.output;
  EXPECT_THAT(small.output, HasSubstr("model.vocab"));
}

TEST_F(TrainCli, MlpLearnsFashionMnist) {
  auto r = brigade("train " + std::string(BRIGADE_SOURCE_DIR) +
                   "/configs/fashion-mnist.toml --set run.out_dir=" + dir_ +
                   "/mlp --set train.steps=60 --set train.warmup=5 --set train.eval_every=0"
                   " --set train.eval_batches=20 --set train.ckpt_every=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream metrics(dir_ + "/mlp/fashion-mnist/metrics.jsonl");
  std::string line, last;
  while (std::getline(metrics, line)) last = line;
  auto j = nlohmann::json::parse(last);
  // Chance is 10%; 60 AdamW steps of 64 images reach well above 60%.
  EXPECT_GT(j["val_accuracy"].get<double>(), 0.6) << last;
}

}  // namespace
}  // namespace brigade::train_cli_test
