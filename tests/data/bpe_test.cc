// Byte and BPE tokenizers: lossless round trips, the trainer against a naive reference trainer,
// encoding against applying the merges one by one, and the merges file.
#include "brigade/data/bpe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "brigade/base/error.h"
#include "brigade/data/byte_tokenizer.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using Merge = BpeTokenizer::Merge;
using testing::expect_throw_mentioning;
using testing::synthetic_text;

std::string all_bytes() {
  std::string s;
  for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  return s;
}

std::vector<std::string> varied_texts() {
  return {"",
          "a",
          " ",
          "hello world",
          "  leading and   inner spaces \n\n\ttabs\r\nCRLF  ",
          "naïve café — Grüße, 日本語 🙂",
          "\xff\xfe invalid \x80\xc3 utf8 \xe2\x82",  // truncated and stray UTF-8 bytes
          std::string("nul\0inside", 10),
          all_bytes(),
          synthetic_text(3000, 7)};
}

// Reference trainer: recounts every pair over every pre-token from scratch at each step.
std::vector<Merge> naive_train(const std::string& text, int32_t vocab_size) {
  std::vector<std::vector<int32_t>> words;
  for (std::string_view w : bpe_pretokenize(text)) {
    words.emplace_back();
    for (unsigned char c : w) words.back().push_back(c);
  }
  std::vector<Merge> merges;
  for (int32_t id = 256; id < vocab_size; ++id) {
    std::map<Merge, int64_t> counts;  // ordered: ties resolve to the smallest pair
    for (const auto& w : words) {
      for (size_t k = 0; k + 1 < w.size(); ++k) ++counts[{w[k], w[k + 1]}];
    }
    Merge best{-1, -1};
    int64_t best_count = 1;
    for (const auto& [p, c] : counts) {
      if (c > best_count) best = p, best_count = c;
    }
    if (best.first < 0) break;
    merges.push_back(best);
    for (auto& w : words) {
      std::vector<int32_t> out;
      for (size_t r = 0; r < w.size();) {
        if (r + 1 < w.size() && w[r] == best.first && w[r + 1] == best.second) {
          out.push_back(id), r += 2;
        } else {
          out.push_back(w[r++]);
        }
      }
      w = out;
    }
  }
  return merges;
}

// Reference encoder: applies each merge, in learned order, to every pre-token.
std::vector<int32_t> naive_encode(const std::vector<Merge>& merges, std::string_view text) {
  std::vector<int32_t> out;
  for (std::string_view w : bpe_pretokenize(text)) {
    std::vector<int32_t> s(w.begin(), w.end());
    for (auto& x : s) x = static_cast<unsigned char>(x);
    for (size_t i = 0; i < merges.size(); ++i) {
      std::vector<int32_t> next;
      for (size_t r = 0; r < s.size();) {
        if (r + 1 < s.size() && s[r] == merges[i].first && s[r + 1] == merges[i].second) {
          next.push_back(256 + static_cast<int32_t>(i)), r += 2;
        } else {
          next.push_back(s[r++]);
        }
      }
      s = next;
    }
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  for (const std::string& text : varied_texts()) {
    const auto ids = tok.encode(text);
    ASSERT_EQ(ids.size(), text.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i], static_cast<unsigned char>(text[i]));
    }
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(BpePretokenize, SplitsOnWhitespaceBoundaries) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(bpe_pretokenize("a  b\n\nc"), (V{"a", " ", " b", "\n\n", "c"}));
  EXPECT_EQ(bpe_pretokenize("Hello world, ok!"), (V{"Hello", " world,", " ok!"}));
  EXPECT_EQ(bpe_pretokenize(" x\n y\t\tz "), (V{" x", "\n", " y", "\t\t", "z", " "}));
  EXPECT_TRUE(bpe_pretokenize("").empty());
}

TEST(BpePretokenize, PiecesConcatenateAndNeverCrossAWordBoundary) {
  auto is_ws = [](char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  };
  for (const std::string& text : varied_texts()) {
    std::string joined;
    for (std::string_view p : bpe_pretokenize(text)) {
      ASSERT_FALSE(p.empty());
      joined += p;
      // Either all whitespace, or an optional single leading space and then no whitespace.
      const bool all_ws = std::all_of(p.begin(), p.end(), is_ws);
      std::string_view body = p[0] == ' ' ? p.substr(1) : p;
      const bool word = !body.empty() && std::none_of(body.begin(), body.end(), is_ws);
      EXPECT_TRUE(all_ws || word) << "'" << p << "'";
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(Bpe, TrainerMatchesNaiveReference) {
  const std::string text = synthetic_text(20000, 3) + all_bytes();
  const BpeTokenizer tok = BpeTokenizer::train(text, 256 + 120);
  const std::vector<Merge> expected = naive_train(text, 256 + 120);
  ASSERT_EQ(tok.merges().size(), expected.size());
  EXPECT_EQ(tok.merges(), expected);
  EXPECT_EQ(tok.vocab_size(), 256 + static_cast<int32_t>(expected.size()));
}

TEST(Bpe, EncodeMatchesApplyingMergesInOrder) {
  const std::string train_text = synthetic_text(20000, 4);
  const BpeTokenizer tok = BpeTokenizer::train(train_text, 400);
  for (const std::string& text : varied_texts()) {
    EXPECT_EQ(tok.encode(text), naive_encode(tok.merges(), text));
  }
}

TEST(Bpe, RoundTripsVariedTextIncludingNonAsciiBytes) {
  const BpeTokenizer tok = BpeTokenizer::train(synthetic_text(50000, 5), 512);
  for (const std::string& text : varied_texts()) {
    const auto ids = tok.encode(text);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size()) << id;
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(Bpe, TrainedMergesCompressTheText) {
  const std::string text = synthetic_text(50000, 6);
  const BpeTokenizer tok = BpeTokenizer::train(text, 512);
  EXPECT_EQ(tok.vocab_size(), 512);
  const auto ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  // A 60-word vocabulary fits in 256 merges almost entirely: ~1-2 tokens per word.
  EXPECT_LT(static_cast<double>(ids.size()), 0.35 * static_cast<double>(text.size()))
      << ids.size() << " tokens for " << text.size() << " bytes";
  // Every merged token stands for exactly the bytes of its two parts.
  for (size_t i = 0; i < tok.merges().size(); ++i) {
    const auto [a, b] = tok.merges()[i];
    EXPECT_EQ(tok.token_bytes(256 + static_cast<int32_t>(i)),
              tok.token_bytes(a) + tok.token_bytes(b));
  }
}

TEST(Bpe, StopsWhenNoPairRepeatsAndRejectsBadVocab) {
  EXPECT_EQ(BpeTokenizer::train("ab cd", 1000).vocab_size(), 256);
  EXPECT_EQ(BpeTokenizer::train("abab", 1000).merges(), (std::vector<Merge>{{'a', 'b'}}));
  EXPECT_THROW(BpeTokenizer::train("abc", 255), ConfigError);
  EXPECT_THROW(BpeTokenizer::train("abc", BpeTokenizer::kMaxVocab + 1), ConfigError);
}

TEST(Bpe, SaveLoadRoundTrip) {
  testing::TempDir dir;
  const std::string text = synthetic_text(20000, 8);
  const BpeTokenizer tok = BpeTokenizer::train(text, 400);
  const std::string path = dir.file("merges.txt");
  tok.save(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  const std::string saved = testing::read_bytes(path);
  EXPECT_EQ(saved.rfind("brigade-bpe 1\n", 0), 0u) << saved.substr(0, 40);
  const BpeTokenizer loaded = BpeTokenizer::load(path);
  EXPECT_EQ(loaded.merges(), tok.merges());
  EXPECT_EQ(loaded.vocab_size(), tok.vocab_size());
  EXPECT_EQ(loaded.encode(text), tok.encode(text));
  // An empty merge list is a valid file too.
  BpeTokenizer().save(path);
  EXPECT_EQ(BpeTokenizer::load(path).vocab_size(), 256);
}

TEST(Bpe, CorruptMergesFileThrowsIoErrorNamingThePath) {
  testing::TempDir dir;
  const std::string path = dir.file("bad-merges.txt");
  const std::string head = "brigade-bpe 1\npretokenizer space-prefixed-words\n";
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"empty", ""},
      {"wrong magic", "gpt2-merges 1\npretokenizer space-prefixed-words\nmerges 0\n"},
      {"wrong version", "brigade-bpe 2\npretokenizer space-prefixed-words\nmerges 0\n"},
      {"wrong pretokenizer", "brigade-bpe 1\npretokenizer gpt2-regex\nmerges 0\n"},
      {"bad count", head + "merges x\n"},
      {"negative count", head + "merges -1\n"},
      {"truncated", head + "merges 3\n97 98\n98 99\n"},
      {"malformed line", head + "merges 1\n97,98\n"},
      {"trailing field", head + "merges 1\n97 98 99\n"},
      {"id from the future", head + "merges 2\n97 98\n256 257\n"},
      {"duplicate", head + "merges 2\n97 98\n97 98\n"},
      {"extra content", head + "merges 1\n97 98\n99 100\n"},
  };
  for (const auto& [name, content] : cases) {
    SCOPED_TRACE(name);
    testing::write_bytes(path, content);
    expect_throw_mentioning<IoError>([&] { BpeTokenizer::load(path); }, path);
  }
  const std::string missing = dir.file("missing.txt");
  expect_throw_mentioning<IoError>([&] { BpeTokenizer::load(missing); }, missing);
}

}  // namespace
}  // namespace brigade
