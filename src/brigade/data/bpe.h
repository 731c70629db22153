#pragma once
// Byte-level byte-pair encoding (Sennrich et al. 2016; GPT-2's byte-level variant).
//
// Ids 0..255 are the raw bytes; merge i joins the adjacent pair (left, right) into the new id
// 256 + i. Encoding applies the merges in the order they were learned, so any byte string
// (including invalid UTF-8) round-trips exactly.
//
// Pre-tokenization: merges never cross a "pre-token". We do not use GPT-2's regex; we split
// only on whitespace boundaries (see bpe_pretokenize): a word is a maximal run of non-whitespace
// bytes, taking one directly preceding ASCII space with it (" world"); all other whitespace
// forms runs of its own ("\n\n", "    "). Whitespace means the ASCII bytes space, \t, \n, \r,
// \v, \f; every other byte (UTF-8 included) is word. Punctuation stays attached to its word.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brigade/data/tokenizer.h"

namespace brigade {

// The pre-tokens of text in order; their concatenation is text. Views into text.
std::vector<std::string_view> bpe_pretokenize(std::string_view text);

class BpeTokenizer final : public Tokenizer {
 public:
  using Merge = std::pair<int32_t, int32_t>;  // (left id, right id)

  static constexpr int32_t kByteVocab = 256;
  static constexpr int32_t kMaxVocab = 1 << 24;
  // Bounds on what a merges file may make us allocate: one token's bytes, all tokens' bytes, and
  // the file itself (2^24 merges of two 8-digit ids fit in it). Training stops before a merge
  // would break the first two, so whatever save() writes, load() reads.
  static constexpr int64_t kMaxTokenBytes = int64_t{1} << 20;
  static constexpr int64_t kMaxTotalTokenBytes = int64_t{1} << 28;
  static constexpr int64_t kMaxMergesFileBytes = int64_t{1} << 29;

  // No merges: behaves like ByteTokenizer.
  BpeTokenizer();

  // Learns up to vocab_size - 256 merges from text. Each step merges the most frequent adjacent
  // pair (counted over all pre-tokens, overlapping occurrences included; ties go to the smaller
  // (left, right)). Stops early when no pair occurs at least twice or the next merge would break
  // kMaxTokenBytes / kMaxTotalTokenBytes, so vocab_size() may be smaller than asked.
  // ConfigError unless 256 <= vocab_size <= kMaxVocab.
  static BpeTokenizer train(std::string_view text, int32_t vocab_size);

  // Reads merges written by save(). IoError naming the path (and the line) when the file is
  // missing or larger than kMaxMergesFileBytes, has the wrong magic/version, or a malformed,
  // out-of-range or duplicate merge, or one that makes a token too long.
  static BpeTokenizer load(const std::string& path);
  // load() of a merges file's contents; path names them in messages.
  static BpeTokenizer parse(const std::string& text, const std::string& path);

  // Writes the merges as text (magic/version line, pre-tokenizer name, count, one "left right"
  // line per merge), atomically. IoError naming the path on failure.
  void save(const std::string& path) const;

  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> tokens) const override;

  const std::vector<Merge>& merges() const { return merges_; }
  // The bytes token id stands for; id in [0, vocab_size()).
  const std::string& token_bytes(int32_t id) const;

 private:
  explicit BpeTokenizer(std::vector<Merge> merges);
  // Encodes one pre-token into out (appends).
  void encode_pretoken(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<Merge> merges_;
  std::vector<std::string> token_bytes_;  // id -> bytes
  // (left << 32 | right) -> merged id; the smaller id is the earlier (higher-priority) merge.
  std::unordered_map<uint64_t, int32_t> merged_id_;
};

}  // namespace brigade
