// Bounded parsing and quoting of untrusted JSON (base/json_limits.h): deep nesting is refused
// by a scan before the parser runs, strings and escapes do not confuse the scan, and an excerpt
// of any value is short and never recurses without bound (issue 13, defect 3).
#include "brigade/base/json_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "brigade/base/error.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;

std::string nested(int depth, const char* open = "[", const char* close = "]") {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += "1";
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

std::string error_of(std::string_view text, JsonLimits limits = {}) {
  try {
    parse_json_bounded(text, "header.json", limits);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonLimits, AcceptsNestingUpToTheLimitAndRefusesDeeper) {
  EXPECT_EQ(parse_json_bounded(nested(64), "x").dump(), nested(64));
  EXPECT_THAT(error_of(nested(65)), HasSubstr("header.json: JSON nests deeper than 64"));
  EXPECT_EQ(error_of(nested(65, "{\"a\":", "}"), {.max_depth = 65}), "");
  EXPECT_THAT(error_of(nested(66, "{\"a\":", "}"), {.max_depth = 65}), HasSubstr("deeper than 65"));
}

TEST(JsonLimits, DeepInputIsRefusedQuicklyWithoutTouchingTheParser) {
  // 100,000 levels crashed the process (dump() of the value in an error message).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of(nested(100'000)), HasSubstr("deeper than 64"));
  EXPECT_THAT(error_of(std::string(1'000'000, '[')), HasSubstr("deeper than 64"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST(JsonLimits, BracketsInsideStringsDoNotCount) {
  const std::string brackets(200, '[');
  EXPECT_EQ(error_of("{\"" + brackets + "\": \"" + brackets + "\"}"), "");
  // An escaped quote does not end the string; an escaped backslash does not escape the quote.
  EXPECT_EQ(error_of("[\"\\\"" + brackets + "\"]"), "");
  EXPECT_THAT(error_of("[\"\\\\\"" + brackets + "\"]"), HasSubstr("deeper than 64"));
  EXPECT_EQ(json_nesting_depth("[[\"]]]]\"]]", 64), 2);
}

TEST(JsonLimits, SizeAndSyntaxErrorsNameTheOrigin) {
  EXPECT_THAT(error_of("[1, 2, 3]", {.max_bytes = 8}),
              HasSubstr("header.json: JSON text of 9 bytes"));
  EXPECT_THAT(error_of("{\"a\":"), HasSubstr("header.json: not valid JSON"));
  EXPECT_THAT(error_of("[\"\xff\"]"), HasSubstr("not valid JSON"));
  // The parser's report quotes the token it choked on; a megabyte string is not copied whole.
  const std::string bad = "[\"" + std::string(1'000'000, 'a') + "\xff\"]";
  EXPECT_LT(error_of(bad).size(), 1000u);
}

TEST(JsonLimits, ExcerptIsShortAndCutOnACharacter) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100'000; ++i) big.push_back(i);
  const std::string e = json_excerpt(big);
  EXPECT_EQ(e.substr(0, 10), "[0,1,2,3,4");
  EXPECT_EQ(e.substr(e.size() - 3), "...");
  EXPECT_LE(e.size(), 123u);
  EXPECT_EQ(json_excerpt(nlohmann::json{{"a", 1}}), "{\"a\":1}");
  EXPECT_EQ(json_excerpt(nlohmann::json("x")), "\"x\"");
  // A long string is cut, and never in the middle of a UTF-8 sequence.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";
  for (size_t max : {10, 11, 12, 13}) {
    const std::string cut = json_excerpt(nlohmann::json(accents), max);
    EXPECT_NO_THROW(nlohmann::json(cut).dump()) << max;  // valid UTF-8
    EXPECT_LE(cut.size(), max + 3);
  }
}

TEST(JsonLimits, ExcerptOfAValueDeeperThanAnyParseIsBounded) {
  // Built in memory (parse_json_bounded would refuse it): the excerpt must not recurse 100,000
  // levels, which dump() does.
  // Moved, never copied: a copy recurses too.
  nlohmann::json deep = 1;
  for (int i = 0; i < 100'000; ++i) {
    nlohmann::json outer = nlohmann::json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  const std::string e = json_excerpt(deep, 1000);
  EXPECT_EQ(e.substr(0, 3), "[[[");
  EXPECT_EQ(e.substr(e.size() - 3), "...");
}

}  // namespace
}  // namespace brigade
