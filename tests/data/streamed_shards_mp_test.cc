// Training on a streamed token folder (issue 18) under `brigade launch --nproc 2`, data-parallel
// and tensor-parallel: a corpus tokenized by `brigade tokenize` into many small shards (so most
// windows of a micro-batch lie in a shard other than their neighbours' and many cross a
// boundary) gives, step by step, the losses, validation losses and bits per byte of the same
// text through data.source = "text", whose tokens are one vector in memory (TokenDataset, the
// whole-load reference), and the same unigram baseline; with byte tokens and with BPE, whose
// merges `brigade tokenize` trains on the train split as every rank of the text run does (rank 0
// alone saves them in the run folder: two ranks writing it raced on its temporary file).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "brigade/base/file_io.h"
#include "brigade/data/shard_index.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_brigade;

std::vector<double> series(const std::string& metrics, const std::string& type,
                           const std::string& key) {
  std::vector<double> out;
  for (const auto& j : testing::metrics_records(metrics, type)) out.push_back(j.at(key));
  return out;
}

class StreamedShardsMp : public ::testing::TestWithParam<int> {};  // the vocabulary

TEST_P(StreamedShardsMp, TrainingOnTwoRanksEqualsTheWholeLoadOfTheSameText) {
  const std::string vocab = std::to_string(GetParam());
  const std::string tokenizer = GetParam() == 256 ? "byte" : "bpe";
  const std::string dir = make_temp_dir("streamed-shards-mp");
  ASSERT_FALSE(dir.empty());
  const std::string corpus = dir + "/corpus";
  std::filesystem::create_directories(corpus);
  for (int f = 0; f < 2; ++f) {
    std::string text;
    for (int i = 0; i < 120; ++i) {
      text += testing::synthetic_text(100 + (i * 37) % 500, 7 * f + i) + "\n\n";
    }
    std::ofstream(corpus + "/" + std::to_string(f) + ".txt") << text;
  }
  const std::string shards = dir + "/shards";
  const auto t = run_brigade("tokenize --source text --input " + corpus + " --out " + shards +
                             " --shard-bytes 1500 --vocab " + vocab + " --timeout-s 60");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const IndexedSplits read = read_indexed_shards(shards);
  ASSERT_GT(read.index.train.shards.size(), 30u);
  ASSERT_GT(read.index.val.shards.size(), 1u);

  const std::string config = dir + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config({{"model.vocab", vocab},
                                                     {"train.steps", "6"},
                                                     {"train.log_every", "1"},
                                                     {"train.eval_every", "3"}});
  for (const std::string axis : {"dp", "tp"}) {
    const std::string layout = "parallel." + axis + "=2";
    const std::string common = "train " + config + " --set run.out_dir=" + dir + " --set " +
                               layout + " --set data.tokenizer=" + tokenizer;
    const std::string a = "shards-" + axis, b = "text-" + axis;
    const auto from_shards = run_brigade(
        common + " --set run.name=" + a + " --set data.source=shards --set data.path=" + shards, 2);
    ASSERT_EQ(from_shards.exit_code, 0) << from_shards.output;
    EXPECT_THAT(from_shards.output, ::testing::HasSubstr("shards in " + shards));
    const auto from_text = run_brigade(
        common + " --set run.name=" + b + " --set data.source=text --set data.path=" + corpus, 2);
    ASSERT_EQ(from_text.exit_code, 0) << from_text.output;
    if (GetParam() != 256) {
      EXPECT_EQ(read_file(dir + "/" + b + "/tokenizer.bpe"), read_file(shards + "/tokenizer.bpe"))
          << layout;
    }
    const std::string ma = dir + "/" + a + "/metrics.jsonl", mb = dir + "/" + b + "/metrics.jsonl";
    const std::vector<double> losses = series(ma, "train", "loss");
    ASSERT_EQ(losses.size(), 6u) << layout;
    EXPECT_EQ(losses, series(mb, "train", "loss")) << layout;
    const std::vector<double> val = series(ma, "eval", "val_loss");
    ASSERT_EQ(val.size(), 2u) << layout;
    EXPECT_EQ(val, series(mb, "eval", "val_loss")) << layout;
    EXPECT_EQ(series(ma, "eval", "val_bits_per_byte"), series(mb, "eval", "val_bits_per_byte"))
        << layout;
    ASSERT_EQ(series(ma, "summary", "unigram_bits_per_byte").size(), 1u) << layout;
    EXPECT_EQ(series(ma, "summary", "unigram_bits_per_byte"),
              series(mb, "summary", "unigram_bits_per_byte"))
        << layout;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Vocab, StreamedShardsMp, ::testing::Values(256, 320),
                         [](const auto& info) {
                           return info.param == 256 ? std::string("Bytes") : std::string("Bpe");
                         });

}  // namespace
}  // namespace brigade
