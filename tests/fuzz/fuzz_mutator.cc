#include "fuzz/fuzz_mutator.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

namespace brigade::fuzz {

namespace {

constexpr std::array<uint8_t, 22> kInterestingBytes = {0,   1,   0x7f, 0x80, 0xff, '"', '\'', '\\',
                                                       '[', ']', '{',  '}',  '\n', '#', '=',  '.',
                                                       ',', ':', ' ',  '0',  '9',  '-'};

constexpr std::array<uint64_t, 22> kInterestingInts = {0,
                                                       1,
                                                       2,
                                                       3,
                                                       4,
                                                       0x7f,
                                                       0x80,
                                                       0xff,
                                                       0x100,
                                                       0x7fff,
                                                       0x8000,
                                                       0xffff,
                                                       0x10000,
                                                       0x7fffffff,
                                                       0x80000000,
                                                       0xffffffff,
                                                       0x100000000ULL,
                                                       1ULL << 40,
                                                       0x7fffffffffffffffULL,
                                                       0x8000000000000000ULL,
                                                       0xffffffffffffffffULL,
                                                       64};

// Numbers that break parsers: out of range for every integer type, overflowing doubles,
// non-finite spellings of TOML and JSON (and some that are neither).
constexpr std::array<const char*, 22> kHugeNumbers = {
    "1e999999",
    "-1e999999",
    "18446744073709551616",
    "99999999999999999999999999",
    "-9223372036854775809",
    "9223372036854775807",
    "-9223372036854775808",
    "0x7fffffffffffffff",
    "1e-400",
    "nan",
    "inf",
    "-inf",
    "+nan",
    "NaN",
    "Infinity",
    "-0",
    "4294967296",
    "2147483648",
    "1.7976931348623157e309",
    "0b1111111111111111111111111111111111111111111111111111111111111111111",
    "1_000_000",
    "0.0000000000000000000000000000000000000000000000001"};

// Syntax of TOML and JSON dropped in the middle of text: string delimiters and escapes that a
// scanner must pair correctly, comments, brackets, and invalid UTF-8.
using namespace std::string_view_literals;
constexpr std::array<std::string_view, 28> kTokens = {
    "\""sv,      "'"sv,       "\"\"\""sv, "'''"sv,      "\\"sv,
    "\\u0000"sv, "\\uD800"sv, "#"sv,      "\n"sv,       "="sv,
    "[["sv,      "]]"sv,      "{"sv,      "}"sv,        ","sv,
    ":"sv,       "a.b.c.d"sv, "\xff"sv,   "\xc0\x80"sv, "\0"sv,
    "null"sv,    "true"sv,    "[]"sv,     "{}"sv,       "1979-05-27T07:32:00Z"sv,
    "\r\n"sv,    "\"\\\""sv,  "\t"sv};

constexpr std::array<int, 7> kNestings = {33, 65, 100, 1000, 5000, 10000, 100000};

size_t pick_pos(Rng& rng, const std::string& s) {
  return s.empty() ? 0 : rng.below(s.size() + 1);
}

// Headers sit at the start of binary files: half of the positions fall in the first 64 bytes.
size_t pick_header_pos(Rng& rng, const std::string& s) {
  if (s.empty()) return 0;
  const size_t n = rng.one_in(2) ? std::min<size_t>(s.size(), 64) : s.size();
  return rng.below(n);
}

// After a '=' or ':' (a value position in TOML / JSON), else anywhere.
size_t pick_value_pos(Rng& rng, const std::string& s) {
  for (int tries = 0; tries < 8 && !s.empty(); ++tries) {
    const size_t p = rng.below(s.size());
    if (s[p] == '=' || s[p] == ':') return p + 1;
  }
  return pick_pos(rng, s);
}

void flip_bit(Rng& rng, std::string& s) {
  if (s.empty()) return;
  s[pick_header_pos(rng, s)] ^= static_cast<char>(1u << rng.below(8));
}

void set_byte(Rng& rng, std::string& s) {
  if (s.empty()) return;
  s[pick_pos(rng, s) % s.size()] =
      static_cast<char>(kInterestingBytes[rng.below(kInterestingBytes.size())]);
}

void write_int(Rng& rng, std::string& s) {
  const int widths[] = {1, 2, 4, 8};
  const int width = widths[rng.below(4)];
  if (s.size() < static_cast<size_t>(width)) return;
  uint64_t v = kInterestingInts[rng.below(kInterestingInts.size())];
  if (rng.one_in(4)) v += rng.below(3) - 1;  // off by one
  const bool big_endian = rng.one_in(3);     // IDX headers are big-endian
  const size_t at = std::min(pick_header_pos(rng, s), s.size() - width);
  for (int i = 0; i < width; ++i) {
    const int shift = 8 * (big_endian ? width - 1 - i : i);
    s[at + i] = static_cast<char>((v >> shift) & 0xff);
  }
}

void insert_random(Rng& rng, std::string& s) {
  std::string bytes(1 + rng.below(16), '\0');
  for (char& c : bytes) c = static_cast<char>(rng.below(256));
  s.insert(pick_pos(rng, s), bytes);
}

void erase_range(Rng& rng, std::string& s) {
  if (s.empty()) return;
  const size_t at = rng.below(s.size());
  s.erase(at, 1 + rng.below(std::max<size_t>(1, (s.size() - at) / 4)));
}

void duplicate_range(Rng& rng, std::string& s) {
  if (s.empty()) return;
  const size_t at = rng.below(s.size());
  const std::string piece = s.substr(at, 1 + rng.below(std::min<size_t>(64, s.size() - at)));
  const size_t times = rng.one_in(8) ? 1 + rng.below(2000) : 1;
  std::string run;
  for (size_t i = 0; i < times; ++i) run += piece;
  s.insert(pick_pos(rng, s), run);
}

void truncate(Rng& rng, std::string& s) {
  s.resize(pick_pos(rng, s));
}

void splice(Rng& rng, std::string& s, std::span<const std::string> seeds) {
  const std::string& other = seeds[rng.below(seeds.size())];
  const size_t cut_here = pick_pos(rng, s);
  const size_t cut_there = other.empty() ? 0 : rng.below(other.size() + 1);
  s = s.substr(0, cut_here) + other.substr(cut_there);
}

void deep_nesting(Rng& rng, std::string& s, int max_nesting) {
  int depth = kNestings[rng.below(kNestings.size())];
  depth = std::min(depth, max_nesting);
  static constexpr std::array<std::pair<const char*, const char*>, 5> kShapes = {
      {{"[", "]"}, {"{\"a\":", "}"}, {"{a=", "}"}, {"[{\"shape\":", "}]"}, {"[[", "]]"}}};
  const auto [open, close] = kShapes[rng.below(kShapes.size())];
  std::string run;
  for (int i = 0; i < depth; ++i) run += open;
  if (rng.one_in(2)) {
    run += "1";
    for (int i = 0; i < depth; ++i) run += close;
  }
  s.insert(pick_value_pos(rng, s), run);
}

void huge_number(Rng& rng, std::string& s) {
  const std::string number = kHugeNumbers[rng.below(kHugeNumbers.size())];
  // Replace a run of digits if there is one near a random position, else insert in a value.
  for (int tries = 0; tries < 8 && !s.empty(); ++tries) {
    size_t p = rng.below(s.size());
    if (s[p] < '0' || s[p] > '9') continue;
    size_t b = p, e = p;
    while (b > 0 && s[b - 1] >= '0' && s[b - 1] <= '9') --b;
    while (e < s.size() && ((s[e] >= '0' && s[e] <= '9') || s[e] == '.' || s[e] == 'e')) ++e;
    s.replace(b, e - b, number);
    return;
  }
  s.insert(pick_value_pos(rng, s), number);
}

void insert_token(Rng& rng, std::string& s) {
  s.insert(pick_pos(rng, s), kTokens[rng.below(kTokens.size())]);
}

void long_dotted_key(Rng& rng, std::string& s) {
  const int parts = kNestings[rng.below(kNestings.size())];
  std::string key = rng.one_in(2) ? "[" : "";
  for (int i = 0; i < parts; ++i) key += "a.";
  key += key[0] == '[' ? "b]\n" : "b = 1\n";
  // At the start of a line.
  size_t at = pick_pos(rng, s);
  while (at > 0 && s[at - 1] != '\n') --at;
  s.insert(at, key);
}

}  // namespace

uint64_t case_seed(uint64_t base, std::string_view name, uint64_t index) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of the class name
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  Rng rng(base ^ h ^ (index * 0x9e3779b97f4a7c15ULL));
  return rng.next();
}

std::string mutate(std::span<const std::string> seeds, uint64_t seed,
                   const MutatorOptions& options) {
  Rng rng(seed);
  std::string s = seeds.empty() ? std::string() : seeds[rng.below(seeds.size())];
  const int n = 1 + static_cast<int>(rng.below(static_cast<uint64_t>(options.max_stacked)));
  for (int m = 0; m < n; ++m) {
    switch (rng.below(13)) {
      case 0:
      case 1:
        flip_bit(rng, s);
        break;
      case 2:
        set_byte(rng, s);
        break;
      case 3:
        write_int(rng, s);
        break;
      case 4:
        insert_random(rng, s);
        break;
      case 5:
        erase_range(rng, s);
        break;
      case 6:
        duplicate_range(rng, s);
        break;
      case 7:
        truncate(rng, s);
        break;
      case 8:
        if (!seeds.empty()) splice(rng, s, seeds);
        break;
      case 9:
        deep_nesting(rng, s, options.max_nesting);
        break;
      case 10:
        huge_number(rng, s);
        break;
      case 11:
        insert_token(rng, s);
        break;
      default:
        long_dotted_key(rng, s);
        break;
    }
    if (s.size() > options.max_size) s.resize(options.max_size);
  }
  return s;
}

}  // namespace brigade::fuzz
