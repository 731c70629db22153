#pragma once
// Cuts a corpus's train and validation splits into numbered shards whose content depends on the
// corpus and the shard size only, never on how many processes tokenize it.
//
// A split's text is its documents joined by kDocSeparator (text_corpus.h). Shard k of a split
// holds the next documents in order until its text reaches shard_text_bytes (or the split ends);
// every shard but the split's first starts with the separator that precedes its first document.
// The shards' texts concatenated are therefore the split's text, byte for byte, and so are
// their BPE encodings: a document ends in a non-space byte (clean_document strips trailing
// whitespace) and the separator starts with "\n", so a pre-token boundary (bpe.h) always falls
// where a shard begins, and encoding the shards one by one gives the tokens of the whole text.
//
// Work is dealt round robin by completion order: the g-th shard completed (of either split,
// counting from 0) is unit g, which rank g mod world tokenizes.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace brigade {

enum class Split { kTrain = 0, kVal = 1 };
inline const char* split_name(Split s) {
  return s == Split::kTrain ? "train" : "val";
}

struct ShardText {
  Split split = Split::kTrain;
  int64_t number = 0;  // within its split
  int64_t unit = 0;    // among all shards, in completion order
  int64_t docs = 0;
  std::string text;
};

class ShardCutter {
 public:
  using Sink = std::function<void(ShardText&&)>;

  // sink receives every completed shard. ConfigError unless shard_text_bytes >= 1.
  ShardCutter(int64_t shard_text_bytes, double val_fraction, Sink sink);

  // Adds the documents of the source file split under `name`, in order, to the train or the
  // validation split by is_validation_doc (empty documents keep their index, add nothing).
  // ConfigError when a split would need more than kMaxShardsPerSplit shards.
  void add_file(const std::string& name, const std::vector<std::string>& docs);

  // Emits the last, short shard of each split (train first). Call once, after the last file.
  void finish();

  int64_t shards(Split s) const { return parts_[static_cast<int>(s)].number; }

 private:
  struct Part {
    int64_t number = 0;  // shards emitted so far
    int64_t docs_total = 0;
    ShardText open;
  };
  void emit(Split s);

  int64_t shard_text_bytes_;
  double val_fraction_;
  Sink sink_;
  int64_t units_ = 0;
  Part parts_[2];
};

// Feeds every document of `input` to cutter, file by file in the order the loaders read them:
// source "fortunes" a fortunes folder (list_fortune_files, parse_fortunes), "text" a file,
// folder or glob (expand_input_files, parse_paragraphs, split_name_of). Returns the bytes read.
int64_t cut_corpus(const std::string& source, const std::string& input, ShardCutter& cutter);

}  // namespace brigade
