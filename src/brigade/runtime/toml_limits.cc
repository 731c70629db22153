// The scan keeps three pieces of state: the stack of open '[' / '{' (arrays, inline tables and
// table headers), whether it is reading a key (at the start of a top-level line, in a table
// header, or after '{' or ',' in an inline table) and how many parts that key has so far.
// Strings are skipped whole, so brackets, dots and '#' inside them count for nothing; so are
// comments.
#include "brigade/runtime/toml_limits.h"

#include <fmt/format.h>

#include <vector>

#include "brigade/base/error.h"

namespace brigade {

namespace {

constexpr int kMaxBinaryDigits = 62;

class TomlScanner {
 public:
  TomlScanner(std::string_view text, const std::string& origin, TomlLimits limits)
      : text_(text), origin_(origin), limits_(limits) {}

  void run() {
    bool line_start = true;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '\n') {
        ++line_;
        ++i_;
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
        continue;
      }
      if (c == '#') {
        skip_comment();
        continue;
      }
      // A top-level line starts a key (or, with '[', a table header whose name is a key).
      if (line_start && stack_.empty()) start_key();
      line_start = false;
      if (c == '"' || c == '\'') {
        skip_string(c);
        continue;
      }
      ++i_;
      switch (c) {
        case '[':
        case '{':
          open(c);
          break;
        case ']':
        case '}':
          if (!stack_.empty()) stack_.pop_back();
          in_key_ = false;
          break;
        case ',':
          if (!stack_.empty() && stack_.back() == '{') start_key();
          break;
        case '=':
          in_key_ = false;
          break;
        case '.':
          if (in_key_ && ++key_parts_ > limits_.max_key_parts) {
            fail(fmt::format("a dotted key has more than {} parts", limits_.max_key_parts));
          }
          break;
        case '0':
          check_binary_integer();
          break;
        default:
          break;
      }
    }
  }

 private:
  static bool is_bare(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  }

  // toml11 reads 0b... by doubling an int64 per digit, which overflows (undefined behaviour) from
  // the 63rd digit on, leading zeros included. i_ is just past a '0'.
  void check_binary_integer() {
    const bool token_start = i_ < 2 || !is_bare(text_[i_ - 2]);
    if (!token_start || i_ >= text_.size() || text_[i_] != 'b') return;
    int digits = 0;
    for (size_t j = i_ + 1;
         j < text_.size() && (text_[j] == '0' || text_[j] == '1' || text_[j] == '_'); ++j) {
      digits += text_[j] != '_';
    }
    if (digits > kMaxBinaryDigits) {
      fail(fmt::format("a binary integer of {} digits (at most {} are read safely)", digits,
                       kMaxBinaryDigits));
    }
  }

  void start_key() {
    in_key_ = true;
    key_parts_ = 1;
  }

  void open(char c) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      fail(fmt::format("arrays and inline tables nest deeper than {} levels", limits_.max_depth));
    }
    stack_.push_back(c);
    if (c == '{') start_key();
  }

  void skip_comment() {
    while (i_ < text_.size() && text_[i_] != '\n') ++i_;
  }

  // Skips a string starting at i_ with quote q: basic ("...", escapes), literal ('...'), or
  // their multi-line forms ("""...""" and '''...'''), which may end with up to two extra quotes
  // ("""a"""" is a" followed by the delimiter). An unterminated string ends at the end of its
  // line (single-line) or of the text.
  void skip_string(char q) {
    const bool escapes = q == '"';
    const bool multi = i_ + 2 < text_.size() && text_[i_ + 1] == q && text_[i_ + 2] == q;
    i_ += multi ? 3 : 1;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (escapes && c == '\\') {
        if (i_ + 1 < text_.size() && text_[i_ + 1] == '\n') ++line_;
        i_ += 2;
        continue;
      }
      if (c == '\n') {
        if (!multi) return;  // toml11 reports the unterminated string
        ++line_;
      }
      ++i_;
      if (c != q) continue;
      if (!multi) return;
      if (i_ + 1 < text_.size() && text_[i_] == q && text_[i_ + 1] == q) {
        i_ += 2;
        for (int extra = 0; extra < 2 && i_ < text_.size() && text_[i_] == q; ++extra) ++i_;
        return;
      }
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw ConfigError(fmt::format("{}: line {}: {} (a brigade config never needs that many)",
                                  origin_, line_, why));
  }

  std::string_view text_;
  const std::string& origin_;
  TomlLimits limits_;
  size_t i_ = 0;
  int64_t line_ = 1;
  std::vector<char> stack_;
  bool in_key_ = false;
  int key_parts_ = 0;
};

}  // namespace

void check_toml_limits(std::string_view text, const std::string& origin, TomlLimits limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    throw ConfigError(fmt::format("{}: {} bytes of TOML, more than the limit of {} bytes", origin,
                                  text.size(), limits.max_bytes));
  }
  // Structure first: a deeply nested line is reported as such, not as a long line.
  TomlScanner(text, origin, limits).run();
  int64_t line = 1;
  for (size_t pos = 0; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (static_cast<int64_t>(end - pos) > limits.max_line_bytes) {
      throw ConfigError(
          fmt::format("{}: line {}: {} bytes, more than the limit of {} bytes for "
                      "a line of TOML",
                      origin, line, end - pos, limits.max_line_bytes));
    }
    pos = end + 1;
  }
}

}  // namespace brigade
