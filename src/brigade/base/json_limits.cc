#include "brigade/base/json_limits.h"

#include <algorithm>

#include "brigade/base/error.h"

namespace brigade {

namespace {

constexpr int kExcerptMaxDepth = 64;
constexpr size_t kMaxParserMessage = 240;

// Writes a compact excerpt of a value into out, stopping once out holds more than limit
// characters, so the cost is bounded by the excerpt and not by the value.
class ExcerptWriter {
 public:
  explicit ExcerptWriter(size_t limit) : limit_(limit) {}

  // False once the excerpt is full (or a level is too deep): the caller stops.
  bool value(const nlohmann::json& j, int depth) {
    if (full()) return false;
    if (j.is_array() || j.is_object()) {
      if (depth >= kExcerptMaxDepth) return cut();
      const bool object = j.is_object();
      out_ += object ? '{' : '[';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out_ += ',';
        first = false;
        if (object) {
          if (!string(it.key())) return false;
          out_ += ':';
        }
        if (!value(*it, depth + 1)) return false;
      }
      out_ += object ? '}' : ']';
      return !full();
    }
    if (j.is_string()) return string(j.get_ref<const std::string&>());
    out_ += j.dump();  // a number, true, false or null: a few characters
    return !full();
  }

  // The excerpt: at most limit characters, ending on a whole UTF-8 sequence, "..." when cut.
  std::string take() {
    if (out_.size() > limit_) {
      out_.resize(limit_);
      cut_ = true;
    }
    if (cut_) {
      // Drop a partial UTF-8 sequence left at the end by the cut.
      size_t n = out_.size();
      while (n > 0 && (static_cast<unsigned char>(out_[n - 1]) & 0xC0) == 0x80) --n;
      if (n > 0 && static_cast<unsigned char>(out_[n - 1]) >= 0xC0) --n;
      out_.resize(n);
      out_ += "...";
    }
    return std::move(out_);
  }

 private:
  bool full() const { return out_.size() > limit_; }
  bool cut() {
    cut_ = true;
    return false;
  }

  // Quotes only as much of s as can show: dumping a 60 MB string to print 120 characters of it
  // would cost the whole string.
  bool string(const std::string& s) {
    const size_t room = limit_ + 1 - std::min(out_.size(), limit_);
    const nlohmann::json prefix = s.size() > room ? s.substr(0, room) : s;
    out_ += prefix.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return !full();
  }

  size_t limit_;
  bool cut_ = false;
  std::string out_;
};

}  // namespace

int json_nesting_depth(std::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (depth > max_depth) return depth;
    } else if (c == ']' || c == '}') {
      // A stray closer makes the text invalid; the parser will say so.
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json_bounded(std::string_view text, const std::string& origin,
                                  JsonLimits limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes) {
    throw IoError(origin + ": JSON text of " + std::to_string(text.size()) +
                  " bytes exceeds the limit of " + std::to_string(limits.max_bytes));
  }
  if (json_nesting_depth(text, limits.max_depth) > limits.max_depth) {
    throw IoError(origin + ": JSON nests deeper than " + std::to_string(limits.max_depth) +
                  " levels of arrays and objects");
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // The parser's message quotes the last token it read, which can be a whole string.
    std::string why = e.what();
    if (why.size() > kMaxParserMessage) why = why.substr(0, kMaxParserMessage) + "...";
    throw IoError(origin + ": not valid JSON: " + why);
  }
}

std::string json_excerpt(const nlohmann::json& j, size_t max_chars) {
  ExcerptWriter w(max_chars);
  w.value(j, 0);
  return w.take();
}

}  // namespace brigade
