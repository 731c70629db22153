// Text corpora: cleaning, the fortune and paragraph parsers, and the train/validation split on
// a synthetic fortunes directory (every document unique, so membership can be checked) and on
// the real Debian fortunes.
#include "brigade/data/text_corpus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "brigade/base/error.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;

// Splits a joined split back into documents; valid when no document contains "\n\n".
std::vector<std::string> split_docs(const std::string& joined) {
  std::vector<std::string> docs;
  if (joined.empty()) return docs;
  size_t pos = 0;
  while (true) {
    const size_t end = joined.find(kDocSeparator, pos);
    docs.push_back(joined.substr(pos, end == std::string::npos ? end : end - pos));
    if (end == std::string::npos) break;
    pos = end + kDocSeparator.size();
  }
  return docs;
}

bool has_percent_line(const std::string& text) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, end - pos, "%") == 0) return true;
    pos = end + 1;
  }
  return false;
}

TEST(TextCorpus, CleanDocument) {
  EXPECT_EQ(clean_document("\n\n  hello  \r\nworld\t\n\n\n"), "  hello\nworld");
  EXPECT_EQ(clean_document("whiter *___\b\b\band* fresher"), "whiter *and* fresher");
  EXPECT_EQ(clean_document("B\bBo\bol\bld"), "Bold");
  EXPECT_EQ(clean_document("ring\a the bell\x7f"), "ring the bell");
  EXPECT_EQ(clean_document("tab\tkept\n\tindent"), "tab\tkept\n\tindent");
  EXPECT_EQ(clean_document(" \n\t\n"), "");
  EXPECT_EQ(clean_document("naïve 日本語"), "naïve 日本語");
}

TEST(TextCorpus, ParseFortunesAndParagraphs) {
  EXPECT_EQ(parse_fortunes("one\n%\ntwo\nlines\n%\n%\n\n%\n%DCL-MEM-BAD\n% \nlast"),
            (std::vector<std::string>{"one", "two\nlines", "%DCL-MEM-BAD", "last"}));
  EXPECT_EQ(parse_fortunes("a\r\n%\r\nb\r\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse_paragraphs("p1 l1\np1 l2\n\n  \n\np2\n\n\n"),
            (std::vector<std::string>{"p1 l1\np1 l2", "p2"}));
}

TEST(TextCorpus, ValidationRuleHitsTheRequestedFraction) {
  for (double f : {0.0, 0.05, 0.3}) {
    int64_t val = 0;
    const int64_t n = 200000;
    for (int64_t k = 0; k < n; ++k) val += is_validation_doc("cookie", k, f);
    // Binomial: 4 standard deviations of the fraction at n = 2e5 is below 0.005.
    EXPECT_NEAR(static_cast<double>(val) / n, f, 0.005) << f;
  }
  // The rule depends on the source name, not only on the index.
  int64_t differ = 0;
  for (int64_t k = 0; k < 1000; ++k) {
    differ += is_validation_doc("art", k, 0.5) != is_validation_doc("zippy", k, 0.5);
  }
  EXPECT_NEAR(differ, 500, 100);
}

class SyntheticFortunes : public ::testing::Test {
 protected:
  void SetUp() override {
    // Files written out of order; an index and a .u8 link whose content must not be read.
    for (const char* name : {"zeta", "alpha", "mid"}) {
      std::string content;
      for (int k = 0; k < 300; ++k) {
        content += std::string("fortune ") + name + " " + std::to_string(k) + "\n\t\t-- x\n%\n";
      }
      testing::write_bytes(dir_.file(name), content);
      expected_docs_ += 300;
    }
    testing::write_bytes(dir_.file("alpha.dat"), "INDEX SHOULD NOT BE READ\n");
    std::filesystem::create_symlink(dir_.file("alpha"), dir_.file("alpha.u8"));
  }
  testing::TempDir dir_;
  int64_t expected_docs_ = 0;
};

TEST_F(SyntheticFortunes, SplitIsADeterministicPartition) {
  const TextSplits s = load_fortunes(dir_.path(), 0.1);
  EXPECT_EQ(s.train_docs + s.val_docs, expected_docs_);
  ASSERT_EQ(s.sources.size(), 3u);
  EXPECT_EQ(s.sources[0].path, dir_.file("alpha"));
  EXPECT_EQ(s.sources[1].path, dir_.file("mid"));
  EXPECT_EQ(s.sources[2].path, dir_.file("zeta"));
  EXPECT_EQ(s.sources[0].size_bytes, std::filesystem::file_size(dir_.file("alpha")));

  const auto train = split_docs(s.train);
  const auto val = split_docs(s.val);
  EXPECT_EQ(static_cast<int64_t>(train.size()), s.train_docs);
  EXPECT_EQ(static_cast<int64_t>(val.size()), s.val_docs);
  std::set<std::string> seen;
  for (const auto* part : {&train, &val}) {
    for (const std::string& d : *part) {
      EXPECT_TRUE(seen.insert(d).second) << "document twice: " << d;
      EXPECT_EQ(d.rfind("fortune ", 0), 0u) << d;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), expected_docs_);
  EXPECT_EQ(s.train.find("INDEX"), std::string::npos);
  // Each document went where the documented rule sends it; files are read in name order.
  for (const std::string& d : val) {
    char name[16];
    int k = -1;
    ASSERT_EQ(std::sscanf(d.c_str(), "fortune %15s %d", name, &k), 2) << d;
    EXPECT_TRUE(is_validation_doc(name, k, 0.1)) << d;
  }
  EXPECT_EQ(train.front().rfind("fortune alpha ", 0), 0u);
  EXPECT_EQ(train.back().rfind("fortune zeta ", 0), 0u);

  const TextSplits again = load_fortunes(dir_.path(), 0.1);
  EXPECT_EQ(again.train, s.train);
  EXPECT_EQ(again.val, s.val);
}

TEST_F(SyntheticFortunes, ZeroValFractionAndBadArguments) {
  const TextSplits s = load_fortunes(dir_.path(), 0.0);
  EXPECT_EQ(s.val_docs, 0);
  EXPECT_TRUE(s.val.empty());
  EXPECT_THROW(load_fortunes(dir_.path(), 1.0), ConfigError);
  EXPECT_THROW(load_fortunes(dir_.path(), -0.1), ConfigError);
  EXPECT_THROW(load_fortunes(dir_.path(), std::nan("")), ConfigError);
  const std::string missing = dir_.file("no-such-dir");
  expect_throw_mentioning<IoError>([&] { load_fortunes(missing); }, missing);
  testing::TempDir empty;
  expect_throw_mentioning<IoError>([&] { load_fortunes(empty.path()); }, empty.path());
}

TEST(TextCorpus, LoadTextFileSplitsByParagraph) {
  testing::TempDir dir;
  const std::string path = dir.file("book.txt");
  std::string content;
  for (int k = 0; k < 400; ++k) content += "paragraph " + std::to_string(k) + "\nsecond line\n\n";
  testing::write_bytes(path, content);
  const TextSplits s = load_text_file(path, 0.25);
  EXPECT_EQ(s.train_docs + s.val_docs, 400);
  EXPECT_NEAR(s.val_docs / 400.0, 0.25, 0.1);
  ASSERT_EQ(s.sources.size(), 1u);
  EXPECT_EQ(s.sources[0].size_bytes, content.size());
  for (const std::string& d : split_docs(s.val)) {
    int k = -1;
    ASSERT_EQ(std::sscanf(d.c_str(), "paragraph %d", &k), 1) << d;
    EXPECT_TRUE(is_validation_doc("book.txt", k, 0.25));
  }
  const std::string missing = dir.file("missing.txt");
  expect_throw_mentioning<IoError>([&] { load_text_file(missing); }, missing);
}

TEST(TextCorpus, RealFortunes) {
  if (!std::filesystem::is_directory(kDefaultFortunesDir)) {
    GTEST_SKIP() << kDefaultFortunesDir << " missing (Debian package 'fortunes')";
  }
  const TextSplits s = load_fortunes(kDefaultFortunesDir, 0.05);
  // Independent count: "%" lines separate fortunes, so fortunes = separators + 1 per file,
  // minus the empty ones after a trailing "%"; the parser may only drop empty documents.
  int64_t separators = 0;
  for (const SourceFile& f : s.sources) {
    EXPECT_EQ(std::filesystem::path(f.path).extension(), "");
    const std::string content = testing::read_bytes(f.path);
    for (size_t pos = 0; pos < content.size();) {
      size_t end = content.find('\n', pos);
      if (end == std::string::npos) end = content.size();
      separators += content.compare(pos, end - pos, "%") == 0;
      pos = end + 1;
    }
  }
  const int64_t docs = s.train_docs + s.val_docs;
  EXPECT_GT(s.sources.size(), 20u);
  EXPECT_LE(docs, separators + static_cast<int64_t>(s.sources.size()));
  EXPECT_GE(docs, separators - 50);
  const double frac = static_cast<double>(s.val_docs) / static_cast<double>(docs);
  EXPECT_NEAR(frac, 0.05, 0.01) << s.val_docs << " of " << docs;
  EXPECT_NEAR(static_cast<double>(s.val.size()) / (s.train.size() + s.val.size()), 0.05, 0.015);
  EXPECT_GT(s.train.size(), 1'000'000u);
  EXPECT_FALSE(has_percent_line(s.train));
  EXPECT_FALSE(has_percent_line(s.val));
  EXPECT_EQ(s.train.find('\b'), std::string::npos);
  EXPECT_EQ(s.train.find('\r'), std::string::npos);
  const TextSplits again = load_fortunes(kDefaultFortunesDir, 0.05);
  EXPECT_TRUE(again.train == s.train && again.val == s.val);
}

}  // namespace
}  // namespace brigade
