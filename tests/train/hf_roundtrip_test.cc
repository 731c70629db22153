// `brigade export --format hf` and `brigade import` end to end, as a user runs them: train a
// tiny GPT, export it, import it into a new run, and require the imported checkpoint to hold
// the same weights bit for bit, to generate the same text, and to be what `brigade train`
// resumes from.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/safetensors.h"
#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::run_command;

const std::string kTinyConfig =
    testing::tiny_gpt_config({{"train.steps", "8"}, {"train.log_every", "1"}});

class HfRoundTrip : public ::testing::Test {
 protected:
  // One trained run ("a", 8 steps) shared by the tests; each test writes elsewhere.
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("hf-roundtrip");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << kTinyConfig;
    auto r = train_in("a");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static testing::CommandResult brigade(const std::string& args) {
    return run_command(std::string(BRIGADE_BINARY) + " " + args);
  }
  static testing::CommandResult train_in(const std::string& out, const std::string& extra = "") {
    return brigade("train " + config_ + " --set run.out_dir=" + dir_ + "/" + out + " " + extra);
  }
  static testing::CommandResult import_into(const std::string& out, const std::string& from,
                                            const std::string& extra = "") {
    return brigade("import --from " + from + " --config " + config_ + " --set run.out_dir=" + dir_ +
                   "/" + out + " " + extra);
  }
  static std::string ckpt(const std::string& out, int step) {
    char name[32];
    std::snprintf(name, sizeof(name), "step_%08d", step);
    return dir_ + "/" + out + "/tiny/checkpoints/" + name;
  }
  // The "loss" of the first step record in a run's metrics.
  static double first_loss(const std::string& out) {
    std::ifstream metrics(dir_ + "/" + out + "/tiny/metrics.jsonl");
    std::string line;
    while (std::getline(metrics, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) return j["loss"].get<double>();
    }
    ADD_FAILURE() << "no loss in " << out;
    return 0;
  }
  // Every tensor of two safetensors files, compared byte for byte.
  static void expect_same_tensors(const std::string& a_path, const std::string& b_path) {
    SafetensorsFile a = SafetensorsFile::open(a_path), b = SafetensorsFile::open(b_path);
    ASSERT_EQ(a.names(), b.names());
    for (const auto& name : a.names()) {
      const StTensorInfo& ia = a.info(name);
      ASSERT_EQ(ia.shape, b.info(name).shape) << name;
      ASSERT_EQ(ia.dtype, b.info(name).dtype) << name;
      std::string da(static_cast<size_t>(ia.end - ia.begin), '\0'), db = da;
      a.read_raw(name, da.data(), ia.end - ia.begin);
      b.read_raw(name, db.data(), ia.end - ia.begin);
      EXPECT_TRUE(da == db) << name << " differs between " << a_path << " and " << b_path;
    }
  }
  static std::string greedy(const std::string& ckpt_dir) {
    auto g =
        brigade("generate --ckpt " + ckpt_dir + " --prompt 'The ' --tokens 40 --temperature 0");
    EXPECT_EQ(g.exit_code, 0) << g.output;
    // The text, without the throughput line generate writes to stderr (times differ).
    return g.output.substr(0, g.output.find("brigade generate: "));
  }

  static std::string dir_, config_;
};
std::string HfRoundTrip::dir_, HfRoundTrip::config_;

TEST_F(HfRoundTrip, ExportThenImportKeepsEveryWeightAndTrainingStartsFromThem) {
  const std::string hf = dir_ + "/hf";
  auto e = brigade("export --ckpt " + dir_ + "/a/tiny --format hf --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_THAT(e.output, HasSubstr("step 8"));
  EXPECT_THAT(e.output, HasSubstr("lm_head.weight omitted"));
  auto config = nlohmann::json::parse(read_file(hf + "/config.json"));
  EXPECT_EQ(config["n_embd"], 32);
  EXPECT_EQ(config["n_positions"], 32);
  SafetensorsFile exported = SafetensorsFile::open(hf + "/model.safetensors");
  EXPECT_TRUE(exported.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_EQ(exported.info("transformer.h.1.attn.c_attn.weight").shape,
            (std::vector<int64_t>{32, 96}));
  EXPECT_NE(run_command("test -e " + hf + "/tokenizer.bpe").exit_code, 0);  // byte tokens

  auto i = import_into("b", hf);
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_THAT(i.output, HasSubstr("step_00000000"));
  // The imported checkpoint (written whole, format 1) holds the trained weights (the trainer's
  // sharded checkpoint) bit for bit: same names, shapes, values.
  const auto trained = testing::read_checkpoint(ckpt("a", 8), testing::CkptPart::kModel);
  ASSERT_FALSE(trained.empty());
  EXPECT_TRUE(trained == testing::read_checkpoint(ckpt("b", 0), testing::CkptPart::kModel));
  // ... and so samples the same text.
  std::string from_a = greedy(ckpt("a", 8)), from_b = greedy(ckpt("b", 0));
  EXPECT_GT(from_a.size(), 30u);
  EXPECT_EQ(from_a, from_b);
  // Exporting the imported checkpoint again reproduces the HF tensors exactly.
  auto e2 = brigade("export --ckpt " + ckpt("b", 0) + " --out " + dir_ + "/hf2");
  ASSERT_EQ(e2.exit_code, 0) << e2.output;
  expect_same_tensors(hf + "/model.safetensors", dir_ + "/hf2/model.safetensors");
  EXPECT_EQ(read_file(hf + "/config.json"), read_file(dir_ + "/hf2/config.json"));

  // Training the imported run resumes from step 0 with the trained weights: same seed, so the
  // same first batch as run a, whose first loss came from the random initialisation.
  auto t = train_in("b", "--set train.steps=2");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_THAT(t.output, HasSubstr("resumed from"));
  EXPECT_THAT(t.output, HasSubstr("step_00000000"));
  EXPECT_LT(first_loss("b"), first_loss("a") - 0.3);
}

TEST_F(HfRoundTrip, BpeMergesTravelWithTheModel) {
  const std::string bpe = "--set data.tokenizer=bpe --set model.vocab=300 --set train.steps=2";
  auto t = train_in("bpe-a", bpe);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string hf = dir_ + "/hf-bpe";
  auto e = brigade("export --ckpt " + dir_ + "/bpe-a/tiny --format hf --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const std::string merges = read_file(dir_ + "/bpe-a/tiny/tokenizer.bpe");
  EXPECT_EQ(read_file(hf + "/tokenizer.bpe"), merges);
  // A byte-level run cannot take a BPE model.
  auto wrong = import_into("bpe-wrong", hf, "--set model.vocab=300");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_THAT(wrong.output, HasSubstr("data.tokenizer"));

  auto i = import_into("bpe-b", hf, bpe);
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_EQ(read_file(dir_ + "/bpe-b/tiny/tokenizer.bpe"), merges);
  EXPECT_EQ(read_file(ckpt("bpe-b", 0) + "/tokenizer.bpe"), merges);
  EXPECT_EQ(greedy(ckpt("bpe-a", 2)), greedy(ckpt("bpe-b", 0)));
}

// An imported checkpoint is the same family as every trainer checkpoint: a tp = 2 or pp = 2
// run starts from it (once refused: "was not written by a model-parallel run"), and from the
// same weights, so its first loss equals the one-process run's from the same import.
TEST_F(HfRoundTrip, ImportedWeightsStartModelParallelRuns) {
  const std::string hf = dir_ + "/hf-mp";
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/a/tiny --out " + hf).exit_code, 0);
  auto launch = [&](const std::string& out, int nproc, const std::string& extra) {
    return run_command(std::string(BRIGADE_BINARY) + " launch --nproc " + std::to_string(nproc) +
                       " -- train " + config_ + " --set run.out_dir=" + dir_ + "/" + out +
                       " --set train.steps=2 " + extra);
  };
  ASSERT_EQ(import_into("mp1", hf).exit_code, 0);
  auto one = launch("mp1", 1, "");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const auto& [out, set] : std::vector<std::pair<std::string, std::string>>{
           {"mp-tp2", "--set parallel.tp=2"}, {"mp-pp2", "--set parallel.pp=2"}}) {
    ASSERT_EQ(import_into(out, hf).exit_code, 0);
    auto r = launch(out, 2, set);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("resumed from"));
    EXPECT_NEAR(first_loss(out), first_loss("mp1"), 1e-5 * first_loss("mp1")) << out;
  }
}

// A mixture-of-experts model trained with expert parallelism exports (router and experts under
// their names, model_type brigade_gpt2_moe, so transformers refuses it loudly) and imports back
// bit for bit into a run that continues from it.
TEST_F(HfRoundTrip, MoeCheckpointExportsAndImportsBack) {
  const std::string moe =
      " --set model.n_experts=4 --set model.moe_top_k=2 --set model.moe_every=2 ";
  auto t = run_command(std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config_ +
                       " --set run.out_dir=" + dir_ +
                       "/moe-a --set train.steps=4 "
                       "--set parallel.ep=2" +
                       moe);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string hf = dir_ + "/hf-moe";
  auto e = brigade("export --ckpt " + dir_ + "/moe-a/tiny --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto config = nlohmann::json::parse(read_file(hf + "/config.json"));
  EXPECT_EQ(config["model_type"], "brigade_gpt2_moe");
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  SafetensorsFile exported = SafetensorsFile::open(hf + "/model.safetensors");
  EXPECT_EQ(exported.info("transformer.h.1.mlp.router.weight").shape,
            (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(exported.info("transformer.h.1.mlp.experts.3.c_fc.weight").shape,
            (std::vector<int64_t>{32, 128}));  // Conv1D (in, out), as the dense MLP
  EXPECT_FALSE(exported.contains("transformer.h.1.mlp.c_fc.weight"));
  EXPECT_TRUE(exported.contains("transformer.h.0.mlp.c_fc.weight"));  // a dense block

  // Importing needs the same experts in [model].
  auto dense = import_into("moe-dense", hf);
  EXPECT_EQ(dense.exit_code, 2) << dense.output;
  EXPECT_THAT(dense.output, HasSubstr("model.n_experts = 0 but num_local_experts = 4"));
  auto i = import_into("moe-b", hf, moe);
  ASSERT_EQ(i.exit_code, 0) << i.output;
  const auto trained = testing::read_checkpoint(ckpt("moe-a", 4), testing::CkptPart::kModel);
  ASSERT_FALSE(trained.empty());
  EXPECT_TRUE(trained == testing::read_checkpoint(ckpt("moe-b", 0), testing::CkptPart::kModel));
  auto e2 = brigade("export --ckpt " + ckpt("moe-b", 0) + " --out " + dir_ + "/hf-moe2");
  ASSERT_EQ(e2.exit_code, 0) << e2.output;
  expect_same_tensors(hf + "/model.safetensors", dir_ + "/hf-moe2/model.safetensors");
  auto again = train_in("moe-b", "--set train.steps=2" + moe);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("step_00000000"));
}

TEST_F(HfRoundTrip, MistakesAreRefusedBeforeAnythingIsWritten) {
  auto format = brigade("export --ckpt " + dir_ + "/a/tiny --format onnx --out " + dir_ + "/x");
  EXPECT_EQ(format.exit_code, 2) << format.output;
  EXPECT_THAT(format.output, HasSubstr("\"hf\""));
  EXPECT_NE(run_command("test -e " + dir_ + "/x").exit_code, 0);
  auto missing = brigade("export --ckpt " + dir_ + "/nope --out " + dir_ + "/x");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;

  const std::string hf = dir_ + "/hf-m";
  ASSERT_EQ(brigade("export --ckpt " + dir_ + "/a/tiny --out " + hf).exit_code, 0);
  auto mismatch = import_into("m", hf, "--set model.d_model=64 --set model.n_head=4");
  EXPECT_EQ(mismatch.exit_code, 2) << mismatch.output;
  EXPECT_THAT(mismatch.output, HasSubstr("model.d_model = 64 but n_embd = 32"));
  EXPECT_THAT(mismatch.output, HasSubstr("model.n_head = 4 but n_head = 2"));
  EXPECT_NE(run_command("test -e " + dir_ + "/m").exit_code, 0);

  // A corrupted weights file names the tensor; nothing is created.
  ASSERT_EQ(run_command("cp -r " + hf + " " + dir_ + "/hf-bad").exit_code, 0);
  {
    std::string bytes = read_file(hf + "/model.safetensors");
    auto pos = bytes.find("\"transformer.h.0.ln_1.bias\"");
    ASSERT_NE(pos, std::string::npos);
    bytes.replace(pos + 1, 11, "transformex");  // same length: the header stays valid
    write_file_durable(dir_ + "/hf-bad/model.safetensors", bytes);
  }
  auto bad = import_into("bad", dir_ + "/hf-bad");
  EXPECT_EQ(bad.exit_code, 3) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("transformex.h.0.ln_1.bias"));
  EXPECT_NE(run_command("test -e " + dir_ + "/bad").exit_code, 0);

  // Importing into a run that already has checkpoints would mix two histories.
  auto again = import_into("a", hf);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("already has checkpoints"));
  EXPECT_THAT(read_file(dir_ + "/a/tiny/checkpoints/latest"), HasSubstr("step_00000008"));
}

}  // namespace
}  // namespace brigade
