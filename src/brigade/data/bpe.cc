// Encoding, decoding and the merges file of BpeTokenizer; training lives in bpe_train.cc.
//
// Encoding one pre-token: repeatedly find the adjacent pair whose merge was learned first (the
// smallest merged id) and replace all its occurrences left to right. This yields exactly what
// applying every merge in learned order would, because a merge can only apply once all the
// earlier merges that could change its operands have been applied.
#include "brigade/data/bpe.h"

#include <charconv>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

constexpr const char* kMagicLine = "brigade-bpe 1";
constexpr const char* kMagicPrefix = "brigade-bpe ";
constexpr const char* kPretokenizerLine = "pretokenizer space-prefixed-words";

inline bool is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Parses a non-negative decimal integer that must fill the whole field.
bool parse_int(std::string_view field, int64_t& out) {
  if (field.empty()) return false;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  return ec == std::errc() && end == field.data() + field.size() && out >= 0;
}

}  // namespace

std::vector<std::string_view> bpe_pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t j = i + 1;
    if (c == ' ' && j < n && !is_space(static_cast<unsigned char>(text[j]))) {
      while (j < n && !is_space(static_cast<unsigned char>(text[j]))) ++j;  // " word"
    } else if (is_space(c)) {
      while (j < n && is_space(static_cast<unsigned char>(text[j]))) ++j;
      // Leave a final space to the word that follows, as the " word" case does.
      if (j < n && j - i > 1 && text[j - 1] == ' ') --j;
    } else {
      while (j < n && !is_space(static_cast<unsigned char>(text[j]))) ++j;
    }
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

BpeTokenizer::BpeTokenizer() : BpeTokenizer(std::vector<Merge>{}) {}

BpeTokenizer::BpeTokenizer(std::vector<Merge> merges) : merges_(std::move(merges)) {
  token_bytes_.reserve(kByteVocab + merges_.size());
  for (int b = 0; b < kByteVocab; ++b) token_bytes_.emplace_back(1, static_cast<char>(b));
  merged_id_.reserve(merges_.size() * 2);
  for (size_t i = 0; i < merges_.size(); ++i) {
    const auto [a, b] = merges_[i];
    const int32_t id = kByteVocab + static_cast<int32_t>(i);
    BRIGADE_CHECK(a >= 0 && b >= 0 && a < id && b < id) << "merge " << i << ": " << a << " " << b;
    token_bytes_.push_back(token_bytes_[a] + token_bytes_[b]);
    merged_id_.emplace(pair_key(a, b), id);
  }
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  BRIGADE_CHECK(id >= 0 && id < vocab_size()) << "token " << id << " vocab " << vocab_size();
  return token_bytes_[id];
}

void BpeTokenizer::encode_pretoken(std::string_view word, std::vector<int32_t>& out) const {
  const size_t start = out.size();
  for (unsigned char c : word) out.push_back(c);
  size_t len = word.size();
  int32_t* s = out.data() + start;
  while (len >= 2) {
    int32_t best = std::numeric_limits<int32_t>::max();
    for (size_t k = 0; k + 1 < len; ++k) {
      auto it = merged_id_.find(pair_key(s[k], s[k + 1]));
      if (it != merged_id_.end() && it->second < best) best = it->second;
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    const auto [a, b] = merges_[best - kByteVocab];
    size_t w = 0;
    for (size_t r = 0; r < len;) {
      if (r + 1 < len && s[r] == a && s[r + 1] == b) {
        s[w++] = best;
        r += 2;
      } else {
        s[w++] = s[r++];
      }
    }
    len = w;
  }
  out.resize(start + len);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 16);
  if (merges_.empty()) {
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  // Natural text repeats its words; remember each distinct pre-token's tokens for this call.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;  // word -> (pos, len)
  for (std::string_view word : bpe_pretokenize(text)) {
    auto it = cache.find(word);
    if (it != cache.end()) {
      const auto [pos, len] = it->second;
      for (size_t k = 0; k < len; ++k) {
        const int32_t t = out[pos + k];  // copy first: push_back may reallocate
        out.push_back(t);
      }
      continue;
    }
    const size_t pos = out.size();
    encode_pretoken(word, out);
    cache.emplace(word, std::make_pair(pos, out.size() - pos));
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> tokens) const {
  require_in_vocab(tokens, vocab_size(), "BPE tokenizer");
  std::string out;
  for (int32_t t : tokens) out += token_bytes_[static_cast<size_t>(t)];
  return out;
}

void BpeTokenizer::save(const std::string& path) const {
  std::ostringstream os;
  os << kMagicLine << "\n"
     << kPretokenizerLine << "\n"
     << "merges " << merges_.size() << "\n";
  for (const auto& [a, b] : merges_) os << a << " " << b << "\n";
  write_file_atomic(path, os.str());
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return parse(read_file(path, kMaxMergesFileBytes), path);
}

BpeTokenizer BpeTokenizer::parse(const std::string& text, const std::string& path) {
  // Lines are taken one at a time: a file of nothing but newlines must not become a vector of
  // a billion views.
  size_t pos = 0;
  size_t line_no = 0;  // 0-based index of the line `next_line` returned last
  bool first = true;
  auto next_line = [&](std::string_view& line) -> bool {
    if (pos >= text.size()) return false;
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    line = std::string_view(text).substr(pos, end - pos);
    pos = end + 1;
    line_no += first ? 0 : 1;
    first = false;
    return true;
  };
  auto fail = [&](size_t line, const std::string& why) -> IoError {
    return IoError(path + ": not a valid BPE merges file (line " + std::to_string(line + 1) +
                   "): " + why);
  };
  // At most this much of a line is quoted in a message.
  auto quote = [](std::string_view line) {
    return line.size() > 80 ? std::string(line.substr(0, 80)) + "..." : std::string(line);
  };
  std::string_view line;
  const bool has_magic = next_line(line);
  if (!has_magic || line.substr(0, std::string_view(kMagicPrefix).size()) != kMagicPrefix) {
    throw fail(0, std::string("expected magic line '") + kMagicLine + "'");
  }
  if (line != kMagicLine) {
    throw fail(0, "unsupported version '" + quote(line) + "', expected '" + kMagicLine + "'");
  }
  if (!next_line(line) || line != kPretokenizerLine) {
    throw fail(1, std::string("expected '") + kPretokenizerLine + "'");
  }
  int64_t count = -1;
  if (!next_line(line) || line.substr(0, 7) != "merges " || !parse_int(line.substr(7), count) ||
      count > kMaxVocab - kByteVocab) {
    throw fail(2, "expected 'merges N' with N <= " + std::to_string(kMaxVocab - kByteVocab));
  }
  // Every line holds at least "a b": a count the file cannot hold is refused before reserving.
  if (count > static_cast<int64_t>(text.size() / 4) + 1) {
    throw fail(2, "'merges " + std::to_string(count) + "' but the file has only " +
                      std::to_string(text.size()) + " bytes (truncated?)");
  }
  std::vector<Merge> merges;
  merges.reserve(static_cast<size_t>(count));
  std::unordered_set<uint64_t> seen;
  // Byte lengths of the tokens: a merge of two long tokens doubles, so 40 lines could otherwise
  // ask for a terabyte.
  std::vector<int64_t> length(static_cast<size_t>(kByteVocab + count), 1);
  int64_t total_bytes = kByteVocab;
  for (int64_t i = 0; i < count; ++i) {
    if (!next_line(line)) {
      throw fail(line_no + 1, "file ends after " + std::to_string(i) + " of " +
                                  std::to_string(count) + " merges (truncated?)");
    }
    const size_t sp = line.find(' ');
    int64_t a = -1, b = -1;
    if (sp == std::string_view::npos || !parse_int(line.substr(0, sp), a) ||
        !parse_int(line.substr(sp + 1), b)) {
      throw fail(line_no, "expected 'left right', got '" + quote(line) + "'");
    }
    const int64_t id = kByteVocab + i;
    if (a >= id || b >= id) {
      throw fail(line_no,
                 "merge " + std::to_string(i) + " refers to an id >= " + std::to_string(id));
    }
    if (!seen.insert(pair_key(static_cast<int32_t>(a), static_cast<int32_t>(b))).second) {
      throw fail(line_no, "duplicate merge " + quote(line));
    }
    length[id] = length[a] + length[b];
    total_bytes += length[id];
    if (length[id] > kMaxTokenBytes || total_bytes > kMaxTotalTokenBytes) {
      throw fail(line_no, "merge " + std::to_string(i) + " makes a token of " +
                              std::to_string(length[id]) +
                              " bytes (limits: " + std::to_string(kMaxTokenBytes) + " per token, " +
                              std::to_string(kMaxTotalTokenBytes) + " for all tokens)");
    }
    merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
  }
  while (next_line(line)) {
    if (!line.empty()) throw fail(line_no, "unexpected content after the last merge");
  }
  return BpeTokenizer(std::move(merges));
}

}  // namespace brigade
