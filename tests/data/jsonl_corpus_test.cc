// JSONL corpora: one JSON object per line. Documents and instruction records come out in line
// order, blank lines skipped; every broken line is an IoError naming file:line and what is wrong
// (malformed JSON, not an object, missing field, non-string field, line too long, nesting too
// deep); the split is the text rule over record indices (naive reference) under the file's
// relative name.
#include "brigade/data/jsonl_corpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "brigade/base/error.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;
using testing::TempDir;
using testing::write_bytes;

// tag followed by i (appended piecewise: GCC 12 warns on "p" + std::to_string(i)).
std::string tagged(const char* tag, int i) {
  std::string s = tag;
  s += std::to_string(i);
  return s;
}

std::string record(const std::string& field, const std::string& text) {
  return nlohmann::json{{field, text}, {"id", 1}}.dump() + "\n";
}

TEST(JsonlDocuments, OneDocumentPerRecordInOrderVerbatim) {
  const std::string content = record("text", "first  \r\n line ") + "\n   \n" + record("text", "") +
                              record("text", "caf\u00e9 \"quoted\"\n\n") +
                              "{\"text\": \"last\"}";  // no final newline
  const std::vector<std::string> docs = parse_jsonl_documents(content, "text", "d.jsonl");
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0], "first  \r\n line ");
  EXPECT_EQ(docs[1], "");
  EXPECT_EQ(docs[2], "caf\u00e9 \"quoted\"\n\n");
  EXPECT_EQ(docs[3], "last");
}

TEST(JsonlDocuments, BrokenLinesNameFileLineAndProblem) {
  const std::string good = record("text", "ok");
  const auto fails = [&](const std::string& bad_line, const std::string& what) {
    SCOPED_TRACE(what);
    const std::string content = good + "\n" + bad_line + "\n" + good;
    expect_throw_mentioning<IoError>([&] { parse_jsonl_documents(content, "text", "c.jsonl"); },
                                     "c.jsonl:3");
    expect_throw_mentioning<IoError>([&] { parse_jsonl_documents(content, "text", "c.jsonl"); },
                                     what);
  };
  fails("{\"text\": \"unterminated}", "c.jsonl:3");
  fails("[\"text\"]", "must be a JSON object");
  fails("{\"body\": \"x\", \"title\": \"y\"}", "no field \"text\"");
  fails("{\"body\": \"x\", \"title\": \"y\"}", "\"body\"");
  fails("{\"text\": 42}", "field \"text\" is number");
  fails("{\"text\": null}", "field \"text\" is null");
  fails("{\"text\": [\"a\"]}", "not a string");
  fails(std::string(100, '[') + std::string(100, ']'), "c.jsonl:3");
  fails("{\"text\": \"a\"} trailing", "c.jsonl:3");
  fails("{\"text\": \"\xff\xfe\"}", "c.jsonl:3");  // invalid UTF-8
}

TEST(JsonlDocuments, ALineOverTheBoundIsRefusedBeforeParsing) {
  std::string big = "{\"text\": \"" + std::string(kMaxJsonlLineBytes, 'a') + "\"}\n";
  expect_throw_mentioning<IoError>([&] { parse_jsonl_documents(big, "text", "big.jsonl"); },
                                   "big.jsonl:1: the line holds");
}

TEST(JsonlInstructions, BothFieldsOfEveryRecord) {
  const std::string content =
      "{\"q\": \"Question: 2+2?\\nAnswer: \", \"a\": \"4\"}\n"
      "{\"a\": \"yes\", \"q\": \"Is it? \", \"other\": {\"nested\": [1, 2]}}\n";
  const auto recs = parse_jsonl_instructions(content, "q", "a", "i.jsonl");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].prompt, "Question: 2+2?\nAnswer: ");
  EXPECT_EQ(recs[0].response, "4");
  EXPECT_EQ(recs[1].prompt, "Is it? ");
  EXPECT_EQ(recs[1].response, "yes");
  expect_throw_mentioning<IoError>(
      [&] { parse_jsonl_instructions("{\"q\": \"x\"}\n", "q", "a", "i.jsonl"); },
      "i.jsonl:1: the record has no field \"a\"");
}

TEST(JsonlLoad, SplitIsTheTextRuleOverRecordIndices) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("set/x"));
  std::filesystem::create_directories(dir.file("set/y"));
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(tagged("document number ", i));
  std::string x, y;
  for (int i = 0; i < 100; ++i) x += record("body", texts[static_cast<size_t>(i)]);
  for (int i = 100; i < 200; ++i) y += record("body", texts[static_cast<size_t>(i)]) + "\n";
  write_bytes(dir.file("set/x/part.jsonl"), x);
  write_bytes(dir.file("set/y/part.jsonl"), y);  // blank lines between records: not counted
  const double f = 0.2;
  const TextSplits got = load_jsonl_text(dir.file("set"), "body", f);
  std::string train, val;
  for (int i = 0; i < 200; ++i) {
    const std::string name = i < 100 ? "x/part.jsonl" : "y/part.jsonl";
    const bool v = is_validation_doc(name, i % 100, f);
    std::string& dst = v ? val : train;
    if (!dst.empty()) dst += kDocSeparator;
    dst += texts[static_cast<size_t>(i)];
  }
  EXPECT_EQ(got.train, train);
  EXPECT_EQ(got.val, val);
  EXPECT_EQ(got.train_docs + got.val_docs, 200);
  EXPECT_GT(got.val_docs, 20);
  EXPECT_EQ(got.sources.size(), 2u);

  std::string inst;
  for (int i = 0; i < 100; ++i) {
    inst += nlohmann::json{{"p", tagged("p", i)}, {"r", tagged("r", i)}}.dump() + "\n";
  }
  write_bytes(dir.file("inst.jsonl"), inst);
  const InstructionSplits is = load_jsonl_instructions(dir.file("inst.jsonl"), "p", "r", f);
  size_t t = 0, v = 0;
  for (int i = 0; i < 100; ++i) {
    const InstructionRecord& r =
        is_validation_doc("inst.jsonl", i, f) ? is.val.at(v++) : is.train.at(t++);
    EXPECT_EQ(r.prompt, tagged("p", i));
    EXPECT_EQ(r.response, tagged("r", i));
  }
  EXPECT_EQ(t, is.train.size());
  EXPECT_EQ(v, is.val.size());
}

}  // namespace
}  // namespace brigade
