// brigade tokenize: trains a byte-level BPE tokenizer on a corpus's train split and writes
// token shards (train.bin, val.bin) and its merges (tokenizer.bpe) into one folder, which
// data.source = "shards" then trains from.
#include <fmt/format.h>

#include <cstdio>

#include "brigade/base/file_io.h"
#include "brigade/cli/commands.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/text_corpus.h"
#include "brigade/data/token_shard.h"
#include "brigade/monitor/timer.h"
#include "brigade/train/training_data.h"

namespace brigade::cli {

namespace {

struct TokenizeArgs {
  std::string source = "fortunes";
  std::string input;
  std::string out;
  int64_t vocab = 512;
  double val_fraction = kDefaultValFraction;
};

int run_tokenize(const TokenizeArgs& args) {
  Stopwatch watch;
  TextSplits splits =
      args.source == "fortunes"
          ? load_fortunes(args.input.empty() ? kDefaultFortunesDir : args.input, args.val_fraction)
          : load_text_file(args.input, args.val_fraction);
  make_dirs(args.out);
  std::unique_ptr<Tokenizer> tokenizer;
  if (args.vocab > 256) {
    auto bpe = BpeTokenizer::train(splits.train, static_cast<int32_t>(args.vocab));
    bpe.save(args.out + "/" + kTokenizerFile);
    tokenizer = std::make_unique<BpeTokenizer>(std::move(bpe));
  } else {
    tokenizer = std::make_unique<ByteTokenizer>();
  }
  auto train = tokenizer->encode(splits.train);
  auto val = tokenizer->encode(splits.val);
  write_token_shard(args.out + "/" + kTrainShardFile, train,
                    static_cast<uint32_t>(tokenizer->vocab_size()));
  write_token_shard(args.out + "/" + kValShardFile, val,
                    static_cast<uint32_t>(tokenizer->vocab_size()));
  std::printf(
      "%s: vocab %d; train %zu bytes -> %zu tokens (%.2f bytes/token); val %zu -> %zu; "
      "%.1f s\n",
      args.out.c_str(), tokenizer->vocab_size(), splits.train.size(), train.size(),
      static_cast<double>(splits.train.size()) / static_cast<double>(train.size()),
      splits.val.size(), val.size(), watch.seconds());
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand(
      "tokenize", "train a BPE tokenizer and write token shards for data.source = \"shards\"");
  sub->add_option("--source", args->source, "fortunes | text")
      ->check(CLI::IsMember({"fortunes", "text"}));
  sub->add_option("--input", args->input, "fortunes folder or text file (default: fortunes)");
  sub->add_option("--out", args->out, "output folder")->required();
  sub->add_option("--vocab", args->vocab, "vocabulary size; 256 = plain bytes")
      ->check(CLI::Range(256, 65536));
  sub->add_option("--val-fraction", args->val_fraction, "share of documents for validation")
      ->check(CLI::Range(0.0001, 0.5));
  return [args]() { return run_tokenize(*args); };
}

}  // namespace brigade::cli
