// brigade's tokenizers written as Hugging Face tokenizer.json files, read back by an independent
// implementation of that format (tests/data/hf_tokenizer_reference.py, from the format's
// documentation and GPT-2's encoder.py): it must give exactly brigade's ids, and decode them to
// the text. A wrong pre-tokenizer regex, byte map or merge order changes the ids.
#include "brigade/data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "brigade/base/error.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using testing::read_bytes;
using testing::run_command;
using testing::synthetic_text;
using testing::TempDir;
using testing::write_bytes;

const std::string kReference =
    std::string(BRIGADE_SOURCE_DIR) + "/tests/data/hf_tokenizer_reference.py";

std::vector<int32_t> reference_encode(const TempDir& dir, const std::string& json,
                                      const std::string& text) {
  write_bytes(dir.file("tokenizer.json"), json);
  write_bytes(dir.file("text.txt"), text);
  const auto r = run_command("python3 " + kReference + " encode " + dir.file("tokenizer.json") +
                             " " + dir.file("text.txt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<int32_t> ids;
  std::istringstream in(r.output);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::string reference_decode(const TempDir& dir, const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += std::to_string(id) + " ";
  write_bytes(dir.file("ids.txt"), text);
  write_bytes(dir.file("out.bin"), "");
  const auto r = run_command("python3 " + kReference + " decode " + dir.file("tokenizer.json") +
                             " " + dir.file("ids.txt") + " > " + dir.file("out.bin"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return read_bytes(dir.file("out.bin"));
}

// Text with every whitespace kind bpe_pretokenize distinguishes: runs of spaces before words,
// tabs, \r\n, \v, \f, blank lines, trailing whitespace.
std::string tricky_text() {
  return synthetic_text(6000, 7) +
         "  two spaces\tthen tab \t mixed\r\nCRLF\x0b vt\x0c ff \n\n  indented\n    deeper  \n"
         "end with spaces   ";
}

TEST(HfTokenizerTest, TheReferenceReadsBpeIdsExactly) {
  TempDir dir;
  const BpeTokenizer bpe = BpeTokenizer::train(synthetic_text(40000, 3), 600);
  ASSERT_GT(bpe.merges().size(), 300u);
  const std::string json = hf_tokenizer_json(bpe);
  for (const std::string& text : {tricky_text(), synthetic_text(3000, 11), std::string("x")}) {
    const std::vector<int32_t> ids = bpe.encode(text);
    EXPECT_EQ(reference_encode(dir, json, text), ids);
    EXPECT_EQ(reference_decode(dir, ids), text);
  }
}

TEST(HfTokenizerTest, ByteTokensAreTheBytesThemselves) {
  TempDir dir;
  const BpeTokenizer bytes;  // no merges: ids are the bytes
  const std::string text = tricky_text();
  const std::vector<int32_t> ids = bytes.encode(text);
  EXPECT_EQ(reference_encode(dir, hf_tokenizer_json(bytes), text), ids);
  for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ(ids[i], static_cast<unsigned char>(text[i]));
}

TEST(HfTokenizerTest, ByteLevelMapIsGpt2s) {
  // GPT-2's published stand-ins: "!" is itself, space is U+0120 "Ġ", newline U+010A "Ċ", byte 0
  // U+0100, byte 0xAD (soft hyphen) U+0143, byte 0xFF itself.
  EXPECT_EQ(byte_level_char('!'), "!");
  EXPECT_EQ(byte_level_char(' '), "\xC4\xA0");
  EXPECT_EQ(byte_level_char('\n'), "\xC4\x8A");
  EXPECT_EQ(byte_level_char(0), "\xC4\x80");
  EXPECT_EQ(byte_level_char(0xAD), "\xC5\x83");
  EXPECT_EQ(byte_level_char(0xFF), "\xC3\xBF");
  // The pre-tokenizer regex cuts what bpe_pretokenize cuts (std::regex has lookahead too).
  const std::string text = tricky_text();
  const std::regex re(hf_pretokenizer_regex());
  std::vector<std::string> pieces;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    pieces.push_back(it->str());
  }
  std::vector<std::string> expected;
  for (std::string_view p : bpe_pretokenize(text)) expected.emplace_back(p);
  EXPECT_EQ(pieces, expected);
}

// End to end: a BPE run's `brigade export` folder holds a tokenizer.json that reads text as the
// run's own merges do.
TEST(HfTokenizerTest, ExportWritesTheRunsTokenizer) {
  TempDir dir;
  write_bytes(dir.file("run.toml"), testing::tiny_gpt_config({{"data.tokenizer", "\"bpe\""},
                                                              {"model.vocab", "300"},
                                                              {"train.steps", "1"},
                                                              {"train.warmup", "0"}}));
  const std::string bin = BRIGADE_BINARY;
  const auto t = run_command(bin + " train " + dir.file("run.toml") +
                             " --set run.out_dir=" + dir.file("runs"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto e =
      run_command(bin + " export --ckpt " + dir.file("runs/tiny") + " --out " + dir.file("hf"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("tokenizer.json and tokenizer_config.json"), std::string::npos)
      << e.output;
  const BpeTokenizer merges = BpeTokenizer::load(dir.file("runs/tiny/tokenizer.bpe"));
  const std::string json = read_bytes(dir.file("hf/tokenizer.json"));
  const std::string text = tricky_text();
  EXPECT_EQ(reference_encode(dir, json, text), merges.encode(text));
  const auto config = nlohmann::json::parse(read_bytes(dir.file("hf/tokenizer_config.json")));
  EXPECT_EQ(config.at("model_max_length"), 32);
}

TEST(HfTokenizerTest, ConfigNamesTheFastTokenizer) {
  const auto j = nlohmann::json::parse(hf_tokenizer_config_json(128));
  EXPECT_EQ(j.at("tokenizer_class"), "PreTrainedTokenizerFast");
  EXPECT_EQ(j.at("model_max_length"), 128);
}

}  // namespace
}  // namespace brigade
