#include "brigade/train/training_data.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/data/idx_reader.h"
#include "brigade/data/instruction_dataset.h"
#include "brigade/data/jsonl_corpus.h"
#include "brigade/data/mapped_token_shard.h"
#include "brigade/data/shard_baseline.h"
#include "brigade/data/shard_index.h"
#include "brigade/data/streamed_token_dataset.h"
#include "brigade/data/text_corpus.h"
#include "brigade/data/token_shard.h"

namespace brigade {

namespace {

// Where a text run's tokenizer comes from and which splits are built.
struct DataPlan {
  std::string tokenizer_path;           // the run folder's merges: reloaded, or trained and saved
  const std::string* merges = nullptr;  // given merges instead (a checkpoint's)
  std::string merges_origin;            // where they came from, for errors
  bool save_trained = true;             // this process writes trained merges to tokenizer_path
  bool whole = false;                   // every document is validation (train is the same set)
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TrainingData load_images(const Config& config) {
  std::string dir = config.data.path.empty() ? kDefaultFashionMnistDir : config.data.path;
  TrainingData data;
  ImageSet train = load_fashion_mnist(dir, "train");
  ImageSet val = load_fashion_mnist(dir, "t10k");
  data.summary = fmt::format("fashion-mnist from {}: {} train, {} validation images", dir,
                             train.count, val.count);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    data.source_files.push_back(dir + "/" + f);
  }
  data.train = std::make_unique<ImageDataset>(std::move(train));
  data.val = std::make_unique<ImageDataset>(std::move(val));
  return data;
}

// A dataset needs one window of seq_len + 1 tokens; say which file is too short, and which key
// asks for the window.
void require_one_window(size_t tokens, const Config& config, const std::string& source) {
  const int64_t T = config.context();
  if (static_cast<int64_t>(tokens) < T + 1) {
    const char* key = config.data.seq_len > 0 ? "data.seq_len" : "model.seq_len";
    throw ConfigError(fmt::format("{} = {}: {} has {} tokens, fewer than one sequence of {} + 1",
                                  key, T, source, tokens, key));
  }
}

// The llm.c / nanoGPT token files of one split in dir, by name order: "*_<split>*.bin"
// (llm.c's tinyshakespeare_train.bin, fineweb_val_000000.bin, ...).
std::vector<std::string> llmc_split_files(const std::string& dir, const std::string& split) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.size() > 4 && name.ends_with(".bin") &&
        name.find("_" + split) != std::string::npos) {
      files.push_back(e.path().string());
    }
  }
  if (ec) throw IoError(fmt::format("{}: cannot list folder: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

// The first shard of a split holding an id at or above the scan's limit: its index in the split
// and the id's position in the split (counted over the shards before it), or {-1, -1}.
struct SplitIdOverLimit {
  int64_t shard = -1;
  int64_t position = -1;
  uint64_t id = 0;
};
SplitIdOverLimit first_id_over_limit(const std::vector<MappedTokenShard>& shards) {
  int64_t start = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    const IdOverLimit over = shards[k].first_id_over_limit();
    if (over.index >= 0) return {static_cast<int64_t>(k), start + over.index, over.id};
    start += shards[k].num_tokens();
  }
  return {};
}

int64_t total_tokens(const std::vector<MappedTokenShard>& shards) {
  int64_t n = 0;
  for (const MappedTokenShard& s : shards) n += s.num_tokens();
  return n;
}

// A folder of llm.c / nanoGPT token files (data/token_shard.h): their ids are another
// tokenizer's (GPT-2's, usually), which brigade does not have, so the run has no tokenizer
// (no bits per byte, no text to sample) and every id is checked against model.vocab. The files
// are mapped, not read (StreamedTokenDataset).
TrainingData load_llmc_shards(const Config& config, const std::string& dir) {
  TrainingData data;
  std::vector<MappedTokenShard> splits[2];
  const char* names[2] = {"train", "val"};
  for (int k = 0; k < 2; ++k) {
    const std::vector<std::string> files = llmc_split_files(dir, names[k]);
    if (files.empty()) {
      throw IoError(fmt::format("{}: no {} split: neither {} nor llm.c token files named *_{}*.bin",
                                dir, names[k], k == 0 ? kTrainShardFile : kValShardFile, names[k]));
    }
    for (const std::string& file : files) {
      MappedTokenShard shard(file, {.id_limit = static_cast<uint64_t>(config.model.vocab)});
      const IdOverLimit bad = shard.first_id_over_limit();
      if (bad.index >= 0) {
        throw ConfigError(fmt::format(
            "model.vocab = {}: {} holds token id {} at position {}{}; set model.vocab above "
            "every id (GPT-2's tokenizer has 50257)",
            config.model.vocab, file, bad.id, bad.index,
            shard.info().llmc ? " (llm.c files record no vocabulary)" : ""));
      }
      splits[k].push_back(std::move(shard));
      data.source_files.push_back(file);
    }
    require_one_window(static_cast<size_t>(total_tokens(splits[k])), config, files.front());
  }
  const int64_t T = config.context();
  data.summary = fmt::format(
      "llm.c token files in {}: {} train tokens, {} validation tokens (ids of the tokenizer that "
      "wrote them; no bits per byte)",
      dir, total_tokens(splits[0]), total_tokens(splits[1]));
  data.train = std::make_unique<StreamedTokenDataset>(std::move(splits[0]), T);
  data.val = std::make_unique<StreamedTokenDataset>(std::move(splits[1]), T);
  return data;
}

// A folder written by `brigade tokenize`: numbered token shards listed in index.json (or, from
// before the index, train.bin and val.bin) plus the tokenizer that made them; or a folder of
// llm.c / nanoGPT token files. The shards are mapped and checked in one pass each at open,
// never held in memory (StreamedTokenDataset); the splits' text statistics come from the same
// pass (counts per id) and one more over the validation split.
TrainingData load_shards(const Config& config) {
  if (config.data.path.empty()) {
    throw ConfigError(
        "data.path = \"\": data.source = \"shards\" needs the folder written by "
        "`brigade tokenize`");
  }
  const std::string& dir = config.data.path;
  // Numbered shards are readable through their index only: without it they are what a stopped
  // `brigade tokenize` left behind.
  const bool indexed = file_exists(dir + "/" + kShardIndexFile);
  if (!indexed && has_numbered_shards(dir)) {
    throw IoError(fmt::format(
        "{}/{}: missing, so the shards beside it are not a finished output (`brigade tokenize` "
        "stopped before writing it, e.g. a rank was killed); run `brigade tokenize` again",
        dir, kShardIndexFile));
  }
  if (!indexed && !file_exists(dir + "/" + kTrainShardFile) &&
      !llmc_split_files(dir, "train").empty()) {
    return load_llmc_shards(config, dir);
  }
  TrainingData data;
  std::string merges = dir + "/" + kTokenizerFile;
  if (file_exists(merges)) {
    data.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::load(merges));
    data.tokenizer_file = merges;
    data.source_files.push_back(merges);
  } else {
    data.tokenizer = std::make_unique<ByteTokenizer>();
  }
  // The shards' ids must be ids of this folder's tokenizer: the opening pass records the first
  // one that is not, and counts the train split's ids for the unigram baseline.
  const auto tokenizer_vocab = static_cast<uint64_t>(data.tokenizer->vocab_size());
  std::vector<uint64_t> train_counts(tokenizer_vocab);
  const SplitScan train_scan{.id_limit = tokenizer_vocab, .id_counts = &train_counts};
  const SplitScan val_scan{.id_limit = tokenizer_vocab};
  std::string train_path = dir + "/" + kTrainShardFile;
  std::string val_path = dir + "/" + kValShardFile;
  std::vector<MappedTokenShard> train, val;
  uint32_t shard_vocab = 0;
  if (indexed) {
    // Every shard checked against the index's size and CRC-32; a split is its shards in order.
    IndexedShardFiles shards = open_indexed_shards(dir, train_scan, val_scan);
    train = std::move(shards.train);
    val = std::move(shards.val);
    shard_vocab = shards.index.vocab;
    for (const std::string& f : shards.files) {
      if (f != merges) data.source_files.push_back(f);
    }
    train_path = dir + "/train_*.bin";  // positions below count from the split's start
    val_path = dir + "/val_*.bin";
  } else {
    train.emplace_back(train_path, ShardScanOptions{.id_limit = train_scan.id_limit,
                                                    .id_counts = train_scan.id_counts});
    val.emplace_back(val_path, ShardScanOptions{.id_limit = val_scan.id_limit});
    data.source_files.push_back(train_path);
    data.source_files.push_back(val_path);
    shard_vocab = std::max(train[0].info().vocab_size, val[0].info().vocab_size);
  }
  if (static_cast<int64_t>(shard_vocab) > config.model.vocab) {
    throw ConfigError(fmt::format("model.vocab = {}: the shards in {} use a vocabulary of {}",
                                  config.model.vocab, dir, shard_vocab));
  }
  // A deleted tokenizer.bpe (bytes are then assumed) or one with fewer merges than the shards
  // were made with is found here, naming the file, rather than when decoding.
  const std::string tokenizer_name =
      data.tokenizer_file.empty() ? fmt::format("the byte tokenizer, as {} is absent", merges)
                                  : fmt::format("the BPE tokenizer of {}", merges);
  for (const auto& [path, shards] : {std::pair{&train_path, &train}, std::pair{&val_path, &val}}) {
    const SplitIdOverLimit bad = first_id_over_limit(*shards);
    if (bad.shard >= 0) {
      throw IoError(fmt::format(
          "{}: token id {} at position {} is outside the vocabulary of {} ({} ids); the shards "
          "were written with another tokenizer (re-run `brigade tokenize`)",
          *path, bad.id, bad.position, tokenizer_name, data.tokenizer->vocab_size()));
    }
  }
  const int64_t T = config.context();
  const int64_t train_tokens = total_tokens(train);
  const int64_t val_tokens = total_tokens(val);
  require_one_window(static_cast<size_t>(train_tokens), config, train_path);
  require_one_window(static_cast<size_t>(val_tokens), config, val_path);
  auto train_set = std::make_unique<StreamedTokenDataset>(std::move(train), T);
  auto val_set = std::make_unique<StreamedTokenDataset>(std::move(val), T);
  const ShardTextStats stats = shard_text_stats(*data.tokenizer, train_counts, *val_set);
  data.val_bytes_per_token = static_cast<double>(stats.val_bytes) / static_cast<double>(val_tokens);
  data.unigram_bits_per_byte = stats.unigram_bits_per_byte;
  data.summary = fmt::format(
      "shards in {}: {} train tokens, {} validation tokens; unigram "
      "baseline {:.3f} bits/byte",
      dir, train_tokens, val_tokens, data.unigram_bits_per_byte);
  data.train = std::move(train_set);
  data.val = std::move(val_set);
  return data;
}

}  // namespace

void resolve_vocab_from_data(Config& config) {
  if (config.model.kind != ModelKind::kGpt || config.model.vocab != 0) return;
  const std::string& dir = config.data.path;
  int64_t vocab = 256;  // byte tokens
  if (config.data.source == DataSource::kShards) {
    if (file_exists(dir + "/" + kShardIndexFile)) {
      const std::string path = dir + "/" + kShardIndexFile;
      vocab = parse_shard_index(read_file(path, kMaxShardIndexBytes), path).vocab;
    } else if (file_exists(dir + "/" + kTrainShardFile)) {
      vocab = read_token_shard_info(dir + "/" + kTrainShardFile).vocab_size;
    } else {
      const std::vector<std::string> files = llmc_split_files(dir, "train");
      if (files.empty()) {
        throw IoError(fmt::format("{}: no {} or llm.c token files to read model.vocab = 0 from",
                                  dir, kTrainShardFile));
      }
      vocab = read_token_shard_info(files.front()).dtype_bytes == 2 ? 50257 : 128256;
    }
  }
  config.model.vocab = vocab;
}

double unigram_bits_per_byte(const std::string& train_text, const std::string& eval_text) {
  std::array<double, 256> counts{};
  counts.fill(1.0);
  for (unsigned char c : train_text) counts[c] += 1.0;
  double total = static_cast<double>(train_text.size()) + 256.0;
  double bits = 0;
  for (unsigned char c : eval_text) bits -= std::log2(counts[c] / total);
  return eval_text.empty() ? 0.0 : bits / static_cast<double>(eval_text.size());
}

namespace {

// The run's tokenizer for text data: bytes, or BPE merges trained on train_text (or reloaded from
// the run folder, so a resumed run tokenizes identically; or a checkpoint's, for evaluation).
// ConfigError if model.vocab is short.
void make_text_tokenizer(const Config& config, const DataPlan& plan, const std::string& train_text,
                         TrainingData& data) {
  if (config.data.tokenizer == TokenizerKind::kBpe) {
    if (plan.merges) {
      data.tokenizer =
          std::make_unique<BpeTokenizer>(BpeTokenizer::parse(*plan.merges, plan.merges_origin));
    } else {
      data.tokenizer_file = plan.tokenizer_path;
      if (file_exists(data.tokenizer_file)) {
        data.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::load(data.tokenizer_file));
      } else {
        auto bpe = BpeTokenizer::train(train_text, static_cast<int32_t>(config.model.vocab));
        if (plan.save_trained) bpe.save(data.tokenizer_file);
        data.tokenizer = std::make_unique<BpeTokenizer>(std::move(bpe));
      }
    }
  } else {
    data.tokenizer = std::make_unique<ByteTokenizer>();
  }
  if (data.tokenizer->vocab_size() > config.model.vocab) {
    throw ConfigError(fmt::format("model.vocab = {}: the tokenizer needs {}", config.model.vocab,
                                  data.tokenizer->vocab_size()));
  }
}

// The text of instruction records as the tokenizer sees it: prompt, response, end separator.
std::string instruction_text(const std::vector<InstructionRecord>& records) {
  std::string text;
  for (const InstructionRecord& r : records) {
    text += r.prompt;
    text += r.response;
    text += kDocSeparator;
  }
  return text;
}

// data.source = "jsonl" with prompt and response fields: one masked example per record.
TrainingData load_instructions(const Config& config, const DataPlan& plan) {
  const DataConfig& dc = config.data;
  const std::string& source = dc.path;
  InstructionSplits splits = load_jsonl_instructions(source, dc.prompt_field, dc.response_field,
                                                     plan.whole ? 0.0 : dc.val_fraction);
  if (plan.whole) std::swap(splits.train, splits.val);
  for (const auto* split : {&splits.train, &splits.val}) {
    if (split->empty() && !(plan.whole && split == &splits.train)) {
      throw ConfigError(fmt::format(
          "data.val_fraction = {}: the {} split of {} has no records ({} train, {} validation)",
          dc.val_fraction, split == &splits.train ? "train" : "validation", source,
          splits.train.size(), splits.val.size()));
    }
  }
  TrainingData data;
  for (const auto& s : splits.sources) data.source_files.push_back(s.path);
  const std::string train_text = instruction_text(splits.train);
  make_text_tokenizer(config, plan, train_text, data);
  const int64_t T = config.context();
  auto train = plan.whole ? nullptr
                          : std::make_unique<InstructionDataset>(splits.train, *data.tokenizer, T,
                                                                 "the train split of " + source);
  auto val = std::make_unique<InstructionDataset>(splits.val, *data.tokenizer, T,
                                                  "the validation split of " + source);
  // Bytes per token and the unigram baseline over what the loss covers: responses and their
  // end separator (before truncation).
  std::string val_answers;
  for (const InstructionRecord& r : splits.val) {
    val_answers += r.response;
    val_answers += kDocSeparator;
  }
  const size_t answer_tokens = data.tokenizer->encode(val_answers).size();
  data.val_bytes_per_token = static_cast<double>(val_answers.size()) /
                             static_cast<double>(std::max<size_t>(1, answer_tokens));
  data.unigram_bits_per_byte = plan.whole ? 0.0 : unigram_bits_per_byte(train_text, val_answers);
  if (plan.whole) {
    data.summary = fmt::format("jsonl instruction records in {}: {} ({} response targets)", source,
                               val->size(), val->total_targets());
    data.val = std::move(val);
    data.train = data.val;
    return data;
  }
  data.summary = fmt::format(
      "jsonl instruction records: {} train ({} response targets, {} truncated to {} tokens, {} "
      "without targets), {} validation ({} response targets); unigram baseline {:.3f} bits/byte",
      train->size(), train->total_targets(), train->examples_truncated(), T + 1,
      train->examples_without_targets(), val->size(), val->total_targets(),
      data.unigram_bits_per_byte);
  data.train = std::move(train);
  data.val = std::move(val);
  return data;
}

// Text, fortunes or JSONL data as plan says: trained or given tokenizer, split or whole.
TrainingData load_text_data(const Config& config, const DataPlan& plan) {
  const DataConfig& dc = config.data;
  const double val_fraction = plan.whole ? 0.0 : dc.val_fraction;
  TextSplits splits;
  std::string source = dc.path;
  if (dc.source == DataSource::kFortunes) {
    if (source.empty()) source = kDefaultFortunesDir;
    splits = load_fortunes(source, val_fraction);
  } else {
    if (source.empty()) {
      throw ConfigError(fmt::format(
          "data.path = \"\": data.source = \"{}\" needs a file, a folder or a glob of files",
          dc.source));
    }
    if (dc.source == DataSource::kText) {
      splits = load_text_files(source, val_fraction);
    } else if (!dc.prompt_field.empty()) {
      return load_instructions(config, plan);
    } else {
      splits = load_jsonl_text(source, dc.text_field, val_fraction);
    }
  }
  if (plan.whole) {
    std::swap(splits.train, splits.val);
    std::swap(splits.train_docs, splits.val_docs);
  }

  TrainingData data;
  for (const auto& s : splits.sources) data.source_files.push_back(s.path);
  make_text_tokenizer(config, plan, splits.train, data);

  std::vector<int32_t> train_tokens = data.tokenizer->encode(splits.train);
  std::vector<int32_t> val_tokens = data.tokenizer->encode(splits.val);
  const int64_t T = config.context();
  if (plan.whole) {
    require_one_window(val_tokens.size(), config, source);
    data.val_bytes_per_token =
        static_cast<double>(splits.val.size()) / static_cast<double>(val_tokens.size());
    data.summary = fmt::format("{} documents in {}: {} ({} bytes, {} tokens)", config.data.source,
                               source, splits.val_docs, splits.val.size(), val_tokens.size());
    data.val = std::make_unique<TokenDataset>(std::move(val_tokens), T);
    data.train = data.val;
    return data;
  }
  require_one_window(train_tokens.size(), config, "the train split of " + source);
  if (static_cast<int64_t>(val_tokens.size()) < T + 1) {
    throw ConfigError(fmt::format(
        "data.val_fraction = {}: the validation split of {} has {} tokens, fewer than one "
        "sequence of data.seq_len + 1 = {}",
        config.data.val_fraction, source, val_tokens.size(), T + 1));
  }
  data.val_bytes_per_token =
      static_cast<double>(splits.val.size()) / static_cast<double>(val_tokens.size());
  data.unigram_bits_per_byte = unigram_bits_per_byte(splits.train, splits.val);
  data.summary = fmt::format(
      "{} documents: {} train ({} bytes, {} tokens), {} validation ({} bytes, {} tokens); "
      "unigram baseline {:.3f} bits/byte",
      config.data.source, splits.train_docs, splits.train.size(), train_tokens.size(),
      splits.val_docs, splits.val.size(), val_tokens.size(), data.unigram_bits_per_byte);
  data.train = std::make_unique<TokenDataset>(std::move(train_tokens), T);
  data.val = std::make_unique<TokenDataset>(std::move(val_tokens), T);
  return data;
}

}  // namespace

TrainingData load_training_data(const Config& config, const RunFolder& folder, int rank) {
  if (config.data.source == DataSource::kFashionMnist) return load_images(config);
  if (config.data.source == DataSource::kShards) return load_shards(config);
  return load_text_data(config, DataPlan{.tokenizer_path = folder.tokenizer_path(),
                                         .merges = nullptr,
                                         .merges_origin = "",
                                         .save_trained = rank == 0,
                                         .whole = false});
}

TrainingData load_evaluation_data(const Config& config, const std::optional<std::string>& merges,
                                  const std::string& origin, bool whole) {
  const DataSource source = config.data.source;
  if (whole && (source == DataSource::kFashionMnist || source == DataSource::kShards)) {
    throw ConfigError(fmt::format(
        "data.source = \"{}\" has a fixed validation split: evaluating all of it needs text, "
        "fortunes or jsonl data",
        source));
  }
  // The data must be tokenized as the checkpoint's model was trained: with its merges, or bytes.
  if (source == DataSource::kFashionMnist) return load_images(config);
  if (source == DataSource::kShards) {
    TrainingData data = load_shards(config);
    const std::string shard_merges =
        data.tokenizer_file.empty() ? std::string() : read_file(data.tokenizer_file);
    if (shard_merges != merges.value_or(std::string())) {
      throw ConfigError(fmt::format(
          "data.path = \"{}\": its shards were tokenized with {}, but {} was trained with {}",
          config.data.path, data.tokenizer_file.empty() ? "bytes" : data.tokenizer_file, origin,
          merges ? "other BPE merges" : "bytes"));
    }
    return data;
  }
  if ((config.data.tokenizer == TokenizerKind::kBpe) != merges.has_value()) {
    throw ConfigError(fmt::format("data.tokenizer = \"{}\": {} holds {}", config.data.tokenizer,
                                  origin,
                                  merges ? "BPE merges (data.tokenizer = \"bpe\")"
                                         : "no tokenizer (data.tokenizer = \"byte\")"));
  }
  return load_text_data(config, DataPlan{.tokenizer_path = "",
                                         .merges = merges ? &*merges : nullptr,
                                         .merges_origin = origin,
                                         .whole = whole});
}

}  // namespace brigade
