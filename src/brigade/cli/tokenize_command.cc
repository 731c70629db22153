// brigade tokenize: trains a byte-level BPE tokenizer on a corpus's train split (or takes given
// merges) and writes numbered token shards and their index (data/shard_index.h) into one folder,
// which data.source = "shards" then trains from. Under `brigade launch --nproc N` the ranks
// share the work:
//
//   1. rank 0 clears the folder's earlier output (the index first), trains the merges on the
//      whole train split exactly as one process does (or loads --merges), saves tokenizer.bpe
//      and publishes the merges in the store; the other ranks wait for them;
//   2. every rank walks the whole corpus (cheap next to encoding) through the same ShardCutter,
//      so all agree on every shard's documents, and encodes and writes the shards dealt to it
//      (unit g to rank g mod N; data/shard_cutter.h), each atomically;
//   3. each rank reports its shards (size, CRC-32) in the store; rank 0 waits for all, checks
//      every file is there and writes index.json last.
//
// Shard contents depend on the corpus and --shard-bytes only, so the folder is byte-identical
// for any N. A rank that fails publishes why, so the others stop waiting at once; every wait is
// bounded by --timeout-s. A killed rank leaves at most *.tmp files and no index, which the reader
// refuses; running the command again completes the folder.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/json_limits.h"
#include "brigade/cli/commands.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/shard_cutter.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/shard_writer.h"
#include "brigade/data/text_corpus.h"
#include "brigade/monitor/timer.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/training_data.h"

namespace brigade::cli {

namespace {

constexpr const char* kTokenizerKey = "tokenize/tokenizer";
constexpr const char* kFailedKey = "tokenize/failed";
constexpr const char* kByteTokens = "byte";
constexpr int64_t kDefaultShardBytes = int64_t{4} << 20;

struct TokenizeArgs {
  std::string source = "fortunes";
  std::string input;
  std::string out;
  int64_t vocab = 512;
  std::string merges;
  double val_fraction = kDefaultValFraction;
  int64_t shard_bytes = kDefaultShardBytes;
  double timeout_s = 3600;
};

std::string done_key(int rank) {
  return fmt::format("tokenize/done/{}", rank);
}

// The ranks of one tokenize job and their store (null for one process).
struct Job {
  int rank = 0;
  int world = 1;
  Store* store = nullptr;
  std::chrono::steady_clock::time_point deadline;
  double timeout_s = 0;

  // Waits for key and returns its value; CommError when a rank published a failure or the
  // deadline passed.
  std::string wait_for(const std::string& key, const std::string& what) const {
    while (!store->check({key})) {
      if (store->check({kFailedKey})) {
        throw CommError(CommError::Kind::kPeerLost,
                        fmt::format("tokenize: stopped waiting for {}: {}", what,
                                    store->get_string(kFailedKey).substr(0, 400)));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw CommError(CommError::Kind::kTimeout,
                        fmt::format("tokenize: waited {} s for {} (--timeout-s) in {}", timeout_s,
                                    what, store->describe()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return store->get_string(key);
  }
};

// Rank 0's half of step 1: the tokenizer, its file in out, and its merges for the others.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizeArgs& args, const std::string& input,
                                          double& train_seconds) {
  std::optional<BpeTokenizer> bpe;
  if (!args.merges.empty()) bpe = BpeTokenizer::load(args.merges);  // before out is cleared
  make_dirs(args.out);
  clear_tokenize_output(args.out);
  if (!bpe && args.vocab > 256) {
    Stopwatch watch;
    const TextSplits splits = args.source == "fortunes" ? load_fortunes(input, args.val_fraction)
                                                        : load_text_files(input, args.val_fraction);
    bpe = BpeTokenizer::train(splits.train, static_cast<int32_t>(args.vocab));
    train_seconds = watch.seconds();
  }
  if (!bpe) return std::make_unique<ByteTokenizer>();
  bpe->save(args.out + "/" + kTokenizerFile);
  return std::make_unique<BpeTokenizer>(std::move(*bpe));
}

std::string tokenizer_message(const Tokenizer& tokenizer, const std::string& out) {
  return dynamic_cast<const BpeTokenizer*>(&tokenizer) ? read_file(out + "/" + kTokenizerFile)
                                                       : std::string(kByteTokens);
}

std::unique_ptr<Tokenizer> tokenizer_from_message(const std::string& message) {
  if (message == kByteTokens) return std::make_unique<ByteTokenizer>();
  return std::make_unique<BpeTokenizer>(BpeTokenizer::parse(message, "rank 0's merges"));
}

nlohmann::json report_json(Split split, int64_t number, const ShardEntry& e) {
  return {{"split", split_name(split)},
          {"number", number},
          {"docs", e.docs},
          {"text_bytes", e.text_bytes},
          {"tokens", e.tokens},
          {"bytes", e.bytes},
          {"crc32", e.crc32}};
}

// Puts one rank's report into the index's split lists, refusing what does not fit.
void add_report(const std::string& text, int from, TokenShardIndex& index) {
  const nlohmann::json j = parse_json_bounded(text, fmt::format("rank {}'s report", from));
  auto bad = [&](const std::string& why) {
    return CommError(CommError::Kind::kOther,
                     fmt::format("tokenize: rank {}'s report: {}", from, why));
  };
  if (!j.is_array()) throw bad("not an array");
  for (const nlohmann::json& r : j) {
    try {
      const bool train = r.at("split").get<std::string>() == "train";
      SplitIndex& s = train ? index.train : index.val;
      const int64_t number = r.at("number").get<int64_t>();
      if (number < 0 || number >= static_cast<int64_t>(s.shards.size())) {
        throw bad(fmt::format("shard number {} out of range", number));
      }
      ShardEntry& e = s.shards[static_cast<size_t>(number)];
      if (!e.file.empty()) throw bad(fmt::format("shard {} reported twice", number));
      e.file = shard_file_name(train ? "train" : "val", number);
      e.docs = r.at("docs").get<int64_t>();
      e.text_bytes = r.at("text_bytes").get<int64_t>();
      e.tokens = r.at("tokens").get<int64_t>();
      e.bytes = r.at("bytes").get<int64_t>();
      e.crc32 = r.at("crc32").get<uint32_t>();
    } catch (const nlohmann::json::exception& ex) {
      throw bad(ex.what());
    }
  }
}

// Rank 0's step 3: every shard reported and on disk, then the index.
void write_index(const std::string& out, TokenShardIndex& index) {
  for (SplitIndex* s : {&index.train, &index.val}) {
    for (size_t k = 0; k < s->shards.size(); ++k) {
      const ShardEntry& e = s->shards[k];
      if (e.file.empty()) {
        throw IoError(fmt::format("{}: shard {} of {} was reported by no rank", out, k,
                                  s == &index.train ? "train" : "val"));
      }
      std::error_code ec;
      const auto size = std::filesystem::file_size(out + "/" + e.file, ec);
      if (ec || static_cast<int64_t>(size) != e.bytes) {
        throw IoError(
            fmt::format("{}/{}: missing or not the {} bytes its rank wrote", out, e.file, e.bytes));
      }
    }
  }
  write_file_atomic(out + "/" + kShardIndexFile, shard_index_json(index));
}

int run_tokenize(const TokenizeArgs& args) {
  Stopwatch watch;
  const std::string input =
      args.input.empty() && args.source == "fortunes" ? kDefaultFortunesDir : args.input;
  if (input.empty()) throw ConfigError("--source text needs --input (a file, folder or glob)");
  const DistEnv env = detect_dist_env();
  CommConfig comm;
  comm.timeout_s = args.timeout_s;
  ProcessGroup group = join_process_group(comm, env, /*communicator=*/false);
  Job job{.rank = env.rank,
          .world = env.world_size,
          .store = group.world_options.store.get(),
          .deadline = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000)),
          .timeout_s = args.timeout_s};
  try {
    // 1. The tokenizer.
    double train_seconds = 0;
    std::unique_ptr<Tokenizer> tokenizer;
    if (job.rank == 0) {
      tokenizer = make_tokenizer(args, input, train_seconds);
      if (job.store) job.store->set_string(kTokenizerKey, tokenizer_message(*tokenizer, args.out));
    } else {
      tokenizer = tokenizer_from_message(job.wait_for(kTokenizerKey, "rank 0's tokenizer"));
    }
    // 2. This rank's shards.
    Stopwatch encode_watch;
    nlohmann::json report = nlohmann::json::array();
    int64_t my_tokens = 0;
    ShardCutter cutter(args.shard_bytes, args.val_fraction, [&](ShardText&& shard) {
      if (shard.unit % job.world != job.rank) return;
      const ShardEntry e = write_shard(args.out, shard, *tokenizer, job.rank);
      my_tokens += e.tokens;
      report.push_back(report_json(shard.split, shard.number, e));
    });
    const int64_t input_bytes = cut_corpus(args.source, input, cutter);
    fsync_dir(args.out);
    if (job.store) job.store->set_string(done_key(job.rank), report.dump());
    if (job.rank != 0) {
      std::printf("[rank %d] %lld tokens in %zu shards, %.1f s\n", job.rank,
                  static_cast<long long>(my_tokens), report.size(), encode_watch.seconds());
      return 0;
    }
    // 3. The index, last.
    TokenShardIndex index;
    index.tokenizer = dynamic_cast<const BpeTokenizer*>(tokenizer.get()) ? "bpe" : "byte";
    if (index.tokenizer == "bpe") {
      const FileDigest d = digest_file(args.out + "/" + kTokenizerFile);
      index.tokenizer_bytes = d.bytes;
      index.tokenizer_crc32 = d.crc32;
    }
    index.vocab = static_cast<uint32_t>(tokenizer->vocab_size());
    index.val_fraction = args.val_fraction;
    index.shard_text_bytes = args.shard_bytes;
    index.train.shards.resize(static_cast<size_t>(cutter.shards(Split::kTrain)));
    index.val.shards.resize(static_cast<size_t>(cutter.shards(Split::kVal)));
    add_report(report.dump(), 0, index);
    for (int r = 1; r < job.world; ++r) {
      add_report(job.wait_for(done_key(r), fmt::format("rank {}'s shards", r)), r, index);
    }
    write_index(args.out, index);
    const double encode_seconds = encode_watch.seconds();
    const int64_t tokens = index.train.tokens() + index.val.tokens();
    std::printf(
        "%s: vocab %u; train %lld bytes -> %lld tokens (%.2f bytes/token) in %zu shards; val %lld "
        "-> %lld in %zu; %lld input bytes on %d rank(s): merges %.2f s, tokenized in %.2f s "
        "(%.0f tokens/s); %.1f s\n",
        args.out.c_str(), index.vocab, static_cast<long long>(index.train.text_bytes()),
        static_cast<long long>(index.train.tokens()),
        static_cast<double>(index.train.text_bytes()) /
            static_cast<double>(std::max<int64_t>(1, index.train.tokens())),
        index.train.shards.size(), static_cast<long long>(index.val.text_bytes()),
        static_cast<long long>(index.val.tokens()), index.val.shards.size(),
        static_cast<long long>(input_bytes), job.world, train_seconds, encode_seconds,
        static_cast<double>(tokens) / std::max(1e-9, encode_seconds), watch.seconds());
    return 0;
  } catch (const std::exception& e) {
    if (job.store) {
      try {
        job.store->set_string(kFailedKey, fmt::format("rank {}: {}", job.rank, e.what()));
      } catch (const std::exception&) {  // the store may be what failed; the error below stands
      }
    }
    throw;
  }
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand(
      "tokenize",
      "train a BPE tokenizer and write token shards for data.source = \"shards\" (on N ranks "
      "under `brigade launch --nproc N`)");
  sub->add_option("--source", args->source, "fortunes | text")
      ->check(CLI::IsMember({"fortunes", "text"}));
  sub->add_option("--input", args->input,
                  "fortunes folder, or a text file, folder or glob (default: fortunes)");
  sub->add_option("--out", args->out, "output folder")->required();
  auto* vocab = sub->add_option("--vocab", args->vocab, "vocabulary size; 256 = plain bytes")
                    ->check(CLI::Range(256, 65536));
  sub->add_option("--merges", args->merges,
                  "use these BPE merges (a tokenizer.bpe) instead of training them")
      ->excludes(vocab);
  sub->add_option("--val-fraction", args->val_fraction, "share of documents for validation")
      ->check(CLI::Range(0.0001, 0.5));
  sub->add_option("--shard-bytes", args->shard_bytes,
                  "text bytes per shard (cut after the document that reaches it; default 4 MiB)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 34));
  sub->add_option("--timeout-s", args->timeout_s,
                  "how long a rank waits for the merges and rank 0 for the shards (default 3600)")
      ->check(CLI::Range(1.0, 1e6));
  return [args]() { return run_tokenize(*args); };
}

}  // namespace brigade::cli
