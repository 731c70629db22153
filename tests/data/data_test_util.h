#pragma once
// Helpers shared by the data tests: a temp directory per test, byte I/O, error matching,
// and a deterministic synthetic text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace brigade::testing {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::string(BRIGADE_TEST_TMP) + "/data-" + info->test_suite_name() + "-" +
            info->name() + "-" + std::to_string(::getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs f, which must throw E whose message contains needle (e.g. the offending path).
template <typename E, typename F>
void expect_throw_mentioning(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not mention '" << needle << "'";
  }
}

// About `bytes` bytes of word-like text: ASCII and UTF-8 words, punctuation, runs of spaces,
// newlines and tabs. Deterministic (mt19937's raw output is fixed by the standard).
inline std::string synthetic_text(size_t bytes, uint32_t seed = 1) {
  static const std::vector<std::string> kWords = {
      "the",   "of",    "and",      "a",       "to",       "in",          "is",       "you",
      "that",  "it",    "he",       "was",     "for",      "on",          "are",      "as",
      "with",  "his",   "they",     "I",       "at",       "be",          "this",     "have",
      "from",  "or",    "one",      "had",     "by",       "word",        "but",      "not",
      "what",  "all",   "were",     "we",      "when",     "your",        "can",      "said",
      "there", "use",   "an",       "each",    "which",    "she",         "do",       "how",
      "their", "if",    "computer", "fortune", "training", "distributed", "gradient", "naïve",
      "café",  "Grüße", "日本語",   "über",    "Ελληνικά", "emoji🙂",   "don't",    "(maybe)",
      "end.",  "what?", "--"};
  std::mt19937 gen(seed);
  std::string out;
  while (out.size() < bytes) {
    out += kWords[gen() % kWords.size()];
    const uint32_t r = gen() % 100;
    out += r < 80 ? " " : r < 88 ? "\n" : r < 92 ? ", " : r < 95 ? "  " : r < 98 ? "\n\n" : "\t";
  }
  return out;
}

}  // namespace brigade::testing
