// The TOML pre-scan (runtime/toml_limits.h): deep nesting and long dotted keys are refused
// before toml11 recurses into them, while every valid config, and brackets, dots and '#' inside
// any kind of string or comment, pass (issue 13, defect 3).
#include "brigade/runtime/toml_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "brigade/base/error.h"
#include "brigade/runtime/config.h"

namespace brigade::toml_limits_test {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    check_toml_limits(text, "x.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(TomlLimits, EveryShippedConfigAndTheResolvedFormPass) {
  int n = 0;
  // configs/plan/ holds the planner's examples (a config and a cluster file): TOML too.
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(BRIGADE_SOURCE_DIR "/configs")) {
    if (!e.is_regular_file() || e.path().extension() != ".toml") continue;
    std::ifstream in(e.path());
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_EQ(error_of(text), "") << e.path();
    ++n;
  }
  EXPECT_GT(n, 0);
  EXPECT_EQ(error_of(Config{}.to_toml()), "");
}

TEST(TomlLimits, RefusesDeepArraysAndInlineTablesNamingTheLine) {
  EXPECT_EQ(error_of("a = " + repeat("[", 32) + "1" + repeat("]", 32)), "");
  EXPECT_THAT(error_of("\n\na = " + repeat("[", 33) + "1" + repeat("]", 33)),
              HasSubstr("x.toml: line 3: arrays and inline tables nest deeper than 32"));
  EXPECT_THAT(error_of("a = " + repeat("{b = ", 40) + "1" + repeat("}", 40)),
              HasSubstr("deeper than 32"));
  // Multi-line arrays count too.
  EXPECT_THAT(error_of("a = " + repeat("[\n", 40)), HasSubstr("line 33"));
}

TEST(TomlLimits, TenThousandLevelsAreRefusedAtOnce) {
  // This depth crashed toml11 (SIGSEGV); 4,000 took it 5-10 s to fail.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of("a = " + repeat("[", 10'000)), HasSubstr("deeper than 32"));
  EXPECT_THAT(error_of("a = " + repeat("{b=", 20'000)), HasSubstr("deeper than 32"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
}

TEST(TomlLimits, RefusesLongDottedKeysAndTableNames) {
  EXPECT_EQ(error_of(repeat("a.", 31) + "b = 1"), "");
  EXPECT_THAT(error_of(repeat("a.", 32) + "b = 1"), HasSubstr("dotted key has more than 32 parts"));
  EXPECT_THAT(error_of("[" + repeat("a.", 20'000) + "b]"), HasSubstr("more than 32 parts"));
  EXPECT_THAT(error_of("x = {" + repeat("a.", 40) + "b = 1}"), HasSubstr("more than 32 parts"));
  // Dots in values are not keys.
  EXPECT_EQ(error_of("a = " + repeat("1.5, ", 1) + "\nb = [" + repeat("1.5, ", 100) + "2.5]"), "");
  EXPECT_EQ(error_of("t = 1979-05-27T07:32:00.999999Z\nv = \"" + repeat("a.", 100) + "\""), "");
}

TEST(TomlLimits, StringsAndCommentsAreSkippedWhole) {
  const std::string deep = repeat("[", 100);
  const std::string dots = repeat("a.", 100);
  for (const std::string& text : {
           "a = \"" + deep + "\"",                            // basic
           "a = '" + deep + "'",                              // literal
           "a = \"\\\"" + deep + "\"",                        // escaped quote inside
           "a = \"\"\"\n" + deep + "\n\"" + deep + "\"\"\"",  // multi-line basic, inner quote
           "a = \"\"\"" + deep + "\"\"\"\"\"",                // ends with two extra quotes
           "a = '''\n" + deep + "'\n'' " + deep + "'''",      // multi-line literal
           "a = '''" + deep + "'''''",                        // ends with two extra quotes
           "# " + deep + "\na = 1 # " + deep,                 // comments
           "\"" + dots + "\" = 1",                            // a quoted key is one part
           "a = \"\"\"\\\n" + deep + "\"\"\"",                // line-ending backslash
       }) {
    EXPECT_EQ(error_of(text), "") << text.substr(0, 40);
  }
  // After a string the scan counts again.
  EXPECT_THAT(error_of("a = \"x\"\nb = " + deep), HasSubstr("line 2"));
  EXPECT_THAT(error_of("a = '''x'''\nb = " + deep), HasSubstr("deeper than 32"));
  EXPECT_THAT(error_of("a = \"\\\\\"\nb = " + deep), HasSubstr("deeper than 32"));
}

TEST(TomlLimits, RefusesBinaryIntegersThatToml11WouldOverflow) {
  // toml11 doubles an int64 per binary digit: signed overflow (UBSan aborts) from 63 digits.
  EXPECT_EQ(error_of("a = 0b" + std::string(62, '1')), "");
  EXPECT_EQ(error_of("a = 0b1_0_1\nb = 0xff\nc = 10b"), "");
  EXPECT_THAT(error_of("a = 0b" + std::string(63, '0')),
              HasSubstr("a binary integer of 63 digits"));
  EXPECT_THAT(error_of("a = [1, 0b" + std::string(70, '1') + "]"), HasSubstr("70 digits"));
  EXPECT_EQ(error_of("a = \"0b" + std::string(70, '1') + "\""), "") << "inside a string";
}

TEST(TomlLimits, RefusesOversizedTextAndLongLines) {
  // toml11 is quadratic in the length of a line: 1 MiB of "1," lines took minutes.
  EXPECT_THAT(error_of(repeat(std::string(1000, '#') + "\n", 66)),
              HasSubstr("x.toml: 66066 bytes of TOML, more than the limit of 65536"));
  EXPECT_EQ(error_of(repeat(std::string(1000, '#') + "\n", 65)), "");
  EXPECT_THAT(error_of("a = 1\n# " + std::string(16 << 10, 'x')),
              HasSubstr("x.toml: line 2: 16386 bytes, more than the limit of 16384"));
  EXPECT_EQ(error_of("# " + std::string((16 << 10) - 2, 'x')), "");
}

}  // namespace
}  // namespace brigade::toml_limits_test
