// load_training_data's text and JSONL branches against references built from the loaders'
// parts: a BPE tokenizer trained on instruction data is BpeTokenizer::train over the train
// split's prompts, responses and separators only (no validation record leaks into it); the
// instruction datasets hold the split's records; a text folder's token dataset is the encoded
// train split of load_text_files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "brigade/data/bpe.h"
#include "brigade/data/instruction_dataset.h"
#include "brigade/data/jsonl_corpus.h"
#include "brigade/data/text_corpus.h"
#include "brigade/train/training_data.h"
#include "common/run_command.h"

namespace brigade {
namespace {

class InstructionData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("instruction-data");
    ASSERT_FALSE(dir_.empty());
    std::ofstream out(dir_ + "/qa.jsonl");
    for (int i = 0; i < 120; ++i) {
      std::string prompt = "Question ";  // piecewise: GCC 12 warns on "..." + std::to_string
      prompt += std::to_string(i);
      prompt += ": what follows?\nAnswer: ";
      std::string response = i % 2 ? "the number " : "number ";
      response += std::to_string(i + 1);
      out << nlohmann::json{{"prompt", prompt}, {"response", response}}.dump() << "\n";
    }
  }
  Config config(const std::vector<std::string>& overrides) const {
    std::vector<std::string> all = {"model.seq_len=32", "run.out_dir=\"" + dir_ + "\""};
    all.insert(all.end(), overrides.begin(), overrides.end());
    Config c = parse_config("", "test.toml", all);
    c.validate();
    return c;
  }
  std::string dir_;
};

TEST_F(InstructionData, BpeTrainsOnTheTrainRecordsOnly) {
  const Config c = config({"data.source=\"jsonl\"", "data.path=\"" + dir_ + "/qa.jsonl\"",
                           "data.prompt_field=\"prompt\"", "data.response_field=\"response\"",
                           "data.tokenizer=\"bpe\"", "model.vocab=300", "data.val_fraction=0.2"});
  std::filesystem::create_directories(dir_ + "/run");
  const TrainingData data = load_training_data(c, RunFolder{dir_ + "/run"});
  const InstructionSplits splits =
      load_jsonl_instructions(dir_ + "/qa.jsonl", "prompt", "response", 0.2);
  ASSERT_FALSE(splits.val.empty());
  std::string train_text;
  for (const InstructionRecord& r : splits.train) {
    train_text += r.prompt + r.response;
    train_text += kDocSeparator;
  }
  const BpeTokenizer want = BpeTokenizer::train(train_text, 300);
  const std::string probe = splits.val[0].prompt + splits.val[0].response + " " + train_text;
  EXPECT_EQ(data.tokenizer->encode(probe), want.encode(probe));
  // With the validation records in the training text the merges would differ.
  std::string all_text = train_text;
  for (const InstructionRecord& r : splits.val) all_text += r.prompt + r.response + "\n\n";
  EXPECT_NE(BpeTokenizer::train(all_text, 300).encode(probe), want.encode(probe));

  const auto* train = dynamic_cast<const InstructionDataset*>(data.train.get());
  const auto* val = dynamic_cast<const InstructionDataset*>(data.val.get());
  ASSERT_NE(train, nullptr);
  ASSERT_NE(val, nullptr);
  EXPECT_EQ(train->size(), static_cast<int64_t>(splits.train.size()));
  EXPECT_EQ(val->size(), static_cast<int64_t>(splits.val.size()));
  EXPECT_EQ(data.source_files, std::vector<std::string>{dir_ + "/qa.jsonl"});
  // A second load (a resumed run) reuses the saved merges.
  const TrainingData again = load_training_data(c, RunFolder{dir_ + "/run"});
  EXPECT_EQ(again.tokenizer->encode(probe), want.encode(probe));
}

TEST_F(InstructionData, TextFolderIsTheEncodedTrainSplit) {
  std::filesystem::create_directories(dir_ + "/corpus/sub");
  for (const char* name : {"/corpus/b.txt", "/corpus/sub/a.txt"}) {
    std::ofstream out(dir_ + name);
    for (int d = 0; d < 80; ++d) out << name << " paragraph " << d << " of some words\n\n";
  }
  const Config c = config({"data.source=\"text\"", "data.path=\"" + dir_ + "/corpus\""});
  const TrainingData data = load_training_data(c, RunFolder{dir_ + "/run-text"});
  const TextSplits splits = load_text_files(dir_ + "/corpus", c.data.val_fraction);
  const auto* train = dynamic_cast<const TokenDataset*>(data.train.get());
  ASSERT_NE(train, nullptr);
  const std::string& t = splits.train;
  EXPECT_EQ(train->tokens(), std::vector<int32_t>(t.begin(), t.end()));  // byte tokens
  EXPECT_EQ(data.source_files.size(), 2u);
}

}  // namespace
}  // namespace brigade
