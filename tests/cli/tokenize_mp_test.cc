// `brigade tokenize` on 1, 2 and 4 ranks (issue 18, distributed preprocessing), run as a user runs
// it: every file of the output folder is byte-identical whatever the number of ranks, with merges
// trained on rank 0 or given; the shards hold exactly the BPE encoding of load_text_files' splits
// (an independent reference, in this process); training on the folder gives the losses of
// training on the same text through data.source = "text"; and a rank killed mid-way leaves a
// folder without index that `train` refuses, which a second run of tokenize completes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "brigade/data/bpe.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/text_corpus.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::run_command;

// Every file of a folder, by name.
std::map<std::string, std::string> folder_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = testing::read_bytes(e.path().string());
  }
  return out;
}

class TokenizeMp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("tokenize-mp");
    ASSERT_FALSE(dir_.empty());
    corpus_ = dir_ + "/corpus";
    std::filesystem::create_directories(corpus_ + "/more");
    // Three files, paragraphs that start with spaces among them.
    for (int f = 0; f < 3; ++f) {
      std::string text;
      for (int i = 0; i < 150; ++i) {
        if (i % 4 == 0) text += "  starts with spaces ";
        text += testing::synthetic_text(100 + (i * 53) % 700, 10 * f + i) + "\n\n";
      }
      std::ofstream(corpus_ + (f == 2 ? "/more/c.txt" : f == 1 ? "/b.txt" : "/a.txt")) << text;
    }
  }
  testing::CommandResult brigade(const std::string& args, int nproc = 1,
                                 const std::string& env = "") {
    const std::string bin = BRIGADE_BINARY;
    return run_command(
        env + (nproc == 0 ? bin + " " + args
                          : bin + " launch --nproc " + std::to_string(nproc) + " -- " + args),
        240);
  }
  // Tokenizes the corpus into dir_/name on nproc ranks (0: without the launcher).
  std::string tokenize(const std::string& name, int nproc, const std::string& extra) {
    const std::string out = dir_ + "/" + name;
    const auto r = brigade("tokenize --source text --input " + corpus_ + " --out " + out +
                               " --shard-bytes 8000 --timeout-s 60 " + extra,
                           nproc);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }
  std::vector<double> losses(const std::string& name, const std::string& kind,
                             const std::string& key) {
    std::vector<double> out;
    for (const auto& j : testing::metrics_records(dir_ + "/" + name + "/metrics.jsonl", kind)) {
      out.push_back(j.at(key).get<double>());
    }
    return out;
  }
  std::string dir_, corpus_;
};

TEST_F(TokenizeMp, OutputIsByteIdenticalOnOneTwoAndFourRanks) {
  const std::string one = tokenize("n1", 0, "--vocab 320");
  const auto reference = folder_files(one);
  // The reference's shape: many shards per split, the index, the merges.
  const IndexedSplits read = read_indexed_shards(one);
  EXPECT_GT(read.index.train.shards.size(), 20u);
  EXPECT_GT(read.index.val.shards.size(), 1u);
  EXPECT_EQ(reference.size(), 2 + read.index.train.shards.size() + read.index.val.shards.size());
  // The tokens of the whole splits as one process encodes them, in this process.
  const TextSplits splits = load_text_files(corpus_, kDefaultValFraction);
  const BpeTokenizer bpe = BpeTokenizer::train(splits.train, 320);
  EXPECT_EQ(read.train, bpe.encode(splits.train));
  EXPECT_EQ(read.val, bpe.encode(splits.val));
  EXPECT_EQ(testing::read_bytes(one + "/tokenizer.bpe"),
            testing::read_bytes((bpe.save(dir_ + "/ref.bpe"), dir_ + "/ref.bpe")));

  for (int n : {1, 2, 4}) {
    const auto files = folder_files(tokenize("trained" + std::to_string(n), n, "--vocab 320"));
    EXPECT_EQ(files.size(), reference.size()) << n;
    for (const auto& [name, bytes] : reference) {
      EXPECT_TRUE(files.contains(name) && files.at(name) == bytes) << n << " ranks: " << name;
    }
  }
  // Given merges: nothing is trained, and the folder is the same.
  const auto given = folder_files(tokenize("given", 2, "--merges " + one + "/tokenizer.bpe"));
  EXPECT_TRUE(given == reference);
  // Byte tokens: no tokenizer.bpe, still identical across ranks.
  EXPECT_TRUE(folder_files(tokenize("bytes1", 0, "--vocab 256")) ==
              folder_files(tokenize("bytes4", 4, "--vocab 256")));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bytes4/tokenizer.bpe"));
}

TEST_F(TokenizeMp, TrainingOnTheFolderEqualsTrainingOnTheText) {
  const std::string shards = tokenize("shards", 2, "--vocab 300");
  const std::string config = dir_ + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"model.vocab", "300"},
                                                     {"train.steps", "8"},
                                                     {"train.log_every", "1"},
                                                     {"train.eval_every", "4"}});
  const std::string common = "train " + config + " --set run.out_dir=" + dir_;
  auto a = brigade(common +
                       " --set run.name=from_shards --set data.source=shards --set "
                       "data.path=" +
                       shards,
                   0);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = brigade(common + " --set run.name=from_text --set data.source=text --set data.path=" +
                       corpus_ + " --set data.tokenizer=bpe",
                   0);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::vector<double> la = losses("from_shards", "train", "loss");
  ASSERT_EQ(la.size(), 8u);
  EXPECT_EQ(la, losses("from_text", "train", "loss"));
  const std::vector<double> va = losses("from_shards", "eval", "val_loss");
  ASSERT_FALSE(va.empty());
  EXPECT_EQ(va, losses("from_text", "eval", "val_loss"));
}

TEST_F(TokenizeMp, AKilledRankLeavesNoReadableFolderAndARerunCompletesIt) {
  const auto reference = folder_files(tokenize("reference", 0, "--vocab 300"));
  const std::string out = dir_ + "/killed";
  // An earlier, finished output in the same folder must not survive as readable either.
  tokenize("killed", 0, "--vocab 256");
  const auto r = brigade("tokenize --source text --input " + corpus_ + " --out " + out +
                             " --shard-bytes 8000 --timeout-s 60 --vocab 300",
                         2, "env BRIGADE_FAULT_TOKENIZE_KILL_RANK=1 ");
  EXPECT_EQ(r.exit_code, 7) << r.output;  // the launcher lost a worker
  EXPECT_THAT(r.output, HasSubstr("rank 1"));
  EXPECT_FALSE(std::filesystem::exists(out + "/index.json"));
  int tmp = 0, whole = 0;
  for (const auto& [name, bytes] : folder_files(out)) {
    tmp += name.ends_with(".tmp");
    whole += name.ends_with(".bin");
  }
  EXPECT_GE(tmp, 1) << "the killed rank's temporary shard";
  EXPECT_GE(whole, 1) << "shards finished before the kill";

  const std::string config = dir_ + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"model.vocab", "300"}});
  auto refused = brigade("train " + config + " --set run.out_dir=" + dir_ +
                             " --set data.source=shards --set data.path=" + out,
                         0);
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr(out + "/index.json: missing"));
  EXPECT_THAT(refused.output, HasSubstr("run `brigade tokenize` again"));

  tokenize("killed", 2, "--vocab 300");
  EXPECT_TRUE(folder_files(out) == reference);
}

TEST_F(TokenizeMp, ARankThatFailsStopsTheJobWithItsMessage) {
  // Rank 0 cannot read the merges: the job stops at once (not after --timeout-s) and says why.
  const auto r = brigade("tokenize --source text --input " + corpus_ + " --out " + dir_ +
                             "/bad --timeout-s 60 --merges " + dir_ + "/nothing.bpe",
                         2);
  EXPECT_EQ(r.exit_code, 7) << r.output;  // the launcher lost a worker
  EXPECT_THAT(r.output, HasSubstr("rank 0 exited with exit code 3"));
  EXPECT_THAT(r.output, HasSubstr(dir_ + "/nothing.bpe"));
}

}  // namespace
}  // namespace brigade
