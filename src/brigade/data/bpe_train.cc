// BPE training with word-frequency dedup and incremental pair counts.
//
// The text is cut into pre-tokens and deduplicated into (word, frequency). We keep, for every
// adjacent pair, its count weighted by word frequency and the list of words it occurs in, plus
// a max-heap of (count, pair). A merge touches only the words that contain its pair: each such
// word's pairs are subtracted, the word is rewritten, and its new pairs are added back, so one
// merge costs time proportional to the affected words instead of the whole corpus.
//
// The heap is lazy: an entry is pushed whenever a pair's count grows, and entries whose count
// no longer matches are re-pushed with the current count (or dropped) when they surface. Every
// live pair therefore has an entry >= its count, so the first entry that matches is the true
// maximum; ties are broken by the smaller (left, right), making training deterministic.
#include <queue>

#include "brigade/base/error.h"
#include "brigade/data/bpe.h"

namespace brigade {

namespace {

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct HeapEntry {
  int64_t count;
  uint64_t pair;
  // std::priority_queue pops the "largest": higher count first, then the smaller pair.
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

class Trainer {
 public:
  explicit Trainer(std::string_view text) {
    std::unordered_map<std::string_view, int64_t> freq;
    for (std::string_view w : bpe_pretokenize(text)) ++freq[w];
    words_.reserve(freq.size());
    freq_.reserve(freq.size());
    for (const auto& [w, f] : freq) {
      if (w.size() < 2) continue;  // no pairs, never changes
      words_.emplace_back(w.begin(), w.end());
      for (auto& s : words_.back()) s = static_cast<unsigned char>(s);
      freq_.push_back(f);
    }
    stamp_.assign(words_.size(), -1);
    for (size_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w];
      for (size_t k = 0; k + 1 < s.size(); ++k) {
        const uint64_t p = pair_key(s[k], s[k + 1]);
        count_[p] += freq_[w];
        where_[p].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [p, c] : count_) heap_.push({c, p});
  }

  // Pops the most frequent pair; false when none occurs at least twice.
  bool best_pair(uint64_t& pair) {
    while (!heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      auto it = count_.find(top.pair);
      const int64_t current = it == count_.end() ? 0 : it->second;
      if (current == top.count) {
        if (current < 2) return false;
        pair = top.pair;
        return true;
      }
      if (current > 0 && current < top.count) heap_.push({current, top.pair});
    }
    return false;
  }

  void merge(uint64_t pair, int32_t new_id) {
    const int32_t a = static_cast<int32_t>(pair >> 32);
    const int32_t b = static_cast<int32_t>(pair & 0xffffffffu);
    std::vector<int32_t> affected = std::move(where_[pair]);
    where_.erase(pair);
    grown_.clear();
    for (int32_t w : affected) {
      if (stamp_[w] == new_id) continue;  // listed twice
      stamp_[w] = new_id;
      auto& s = words_[w];
      bool present = false;
      for (size_t k = 0; k + 1 < s.size() && !present; ++k) present = s[k] == a && s[k + 1] == b;
      if (!present) continue;  // stale entry: an earlier merge rewrote this word
      const int64_t f = freq_[w];
      for (size_t k = 0; k + 1 < s.size(); ++k) add(pair_key(s[k], s[k + 1]), -f);
      size_t out = 0;
      for (size_t r = 0; r < s.size();) {
        if (r + 1 < s.size() && s[r] == a && s[r + 1] == b) {
          s[out++] = new_id;
          r += 2;
        } else {
          s[out++] = s[r++];
        }
      }
      s.resize(out);
      for (size_t k = 0; k + 1 < s.size(); ++k) {
        const uint64_t p = pair_key(s[k], s[k + 1]);
        add(p, f);
        // Only pairs with the new id are new to this word; the others already list it.
        if (s[k] == new_id || s[k + 1] == new_id) {
          where_[p].push_back(w);
          grown_.push_back(p);
        }
      }
    }
    count_.erase(pair);
    for (uint64_t p : grown_) {
      auto it = count_.find(p);
      if (it != count_.end()) heap_.push({it->second, p});
    }
  }

 private:
  void add(uint64_t p, int64_t delta) {
    auto it = count_.try_emplace(p, 0).first;
    it->second += delta;
    if (it->second == 0) count_.erase(it);
  }

  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> freq_;
  std::vector<int32_t> stamp_;  // last merge id that visited the word
  std::unordered_map<uint64_t, int64_t> count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<HeapEntry> heap_;
  std::vector<uint64_t> grown_;
};

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view text, int32_t vocab_size) {
  if (vocab_size < kByteVocab || vocab_size > kMaxVocab) {
    throw ConfigError("BPE vocab_size = " + std::to_string(vocab_size) + ": must be in [" +
                      std::to_string(kByteVocab) + ", " + std::to_string(kMaxVocab) + "]");
  }
  Trainer trainer(text);
  std::vector<Merge> merges;
  std::vector<int64_t> length(kByteVocab, 1);  // bytes per token, bounded as load() bounds them
  int64_t total_bytes = kByteVocab;
  for (int32_t id = kByteVocab; id < vocab_size; ++id) {
    uint64_t pair;
    if (!trainer.best_pair(pair)) break;
    const int32_t a = static_cast<int32_t>(pair >> 32);
    const int32_t b = static_cast<int32_t>(pair & 0xffffffffu);
    const int64_t len = length[a] + length[b];
    if (len > kMaxTokenBytes || total_bytes + len > kMaxTotalTokenBytes) break;
    trainer.merge(pair, id);
    merges.emplace_back(a, b);
    length.push_back(len);
    total_bytes += len;
  }
  return BpeTokenizer(std::move(merges));
}

}  // namespace brigade
