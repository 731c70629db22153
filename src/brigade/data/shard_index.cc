#include "brigade/data/shard_index.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/json_limits.h"
#include "brigade/data/bpe.h"
#include "brigade/data/mapped_token_shard.h"
#include "brigade/data/token_shard.h"

namespace brigade {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kSplits[2] = {"train", "val"};
constexpr const char* kTokenizerName = "tokenizer.bpe";

std::string hex32(uint32_t v) {
  return fmt::format("0x{:08x}", v);
}

// Reads the fields of untrusted JSON, naming path and the field on every mismatch.
class Fields {
 public:
  explicit Fields(const std::string& path) : path_(path) {}

  IoError bad(const std::string& where, const std::string& why) const {
    return IoError(fmt::format("{}: bad shard index: {}: {}", path_, where, why));
  }
  const nlohmann::json& member(const nlohmann::json& obj, const char* key,
                               const std::string& where) const {
    if (!obj.is_object()) throw bad(where, "expected an object, got " + json_excerpt(obj, 60));
    auto it = obj.find(key);
    if (it == obj.end()) throw bad(where, fmt::format("missing \"{}\"", key));
    return *it;
  }
  int64_t count(const nlohmann::json& obj, const char* key, const std::string& where,
                int64_t max = kMaxDataFileBytes) const {
    const nlohmann::json& v = member(obj, key, where);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) {
      throw bad(where + "." + key,
                fmt::format("expected an integer in [0, {}], got {}", max, json_excerpt(v, 60)));
    }
    return v.get<int64_t>();
  }
  std::string text(const nlohmann::json& obj, const char* key, const std::string& where) const {
    const nlohmann::json& v = member(obj, key, where);
    if (!v.is_string()) throw bad(where + "." + key, "expected a string, got " + json_excerpt(v));
    return v.get<std::string>();
  }
  uint32_t crc(const nlohmann::json& obj, const char* key, const std::string& where) const {
    const std::string s = text(obj, key, where);
    const bool ok = s.size() == 10 && s.starts_with("0x") &&
                    s.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
    if (!ok)
      throw bad(where + "." + key, "expected \"0x\" and 8 hex digits, got " + s.substr(0, 40));
    return static_cast<uint32_t>(std::stoul(s.substr(2), nullptr, 16));
  }

 private:
  const std::string& path_;
};

SplitIndex parse_split(const Fields& f, const nlohmann::json& splits, const char* split,
                       uint32_t vocab) {
  const std::string where = std::string("splits.") + split;
  const nlohmann::json& s = f.member(splits, split, "splits");
  const nlohmann::json& shards = f.member(s, "shards", where);
  if (!shards.is_array() || static_cast<int64_t>(shards.size()) > kMaxShardsPerSplit) {
    throw f.bad(where + ".shards",
                fmt::format("expected an array of at most {} shards", kMaxShardsPerSplit));
  }
  const int64_t dtype = vocab <= 65536 ? 2 : 4;
  SplitIndex out;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string at = fmt::format("{}.shards[{}]", where, k);
    ShardEntry e;
    e.file = f.text(shards[k], "file", at);
    // The exact name: an index cannot point outside its folder.
    if (e.file != shard_file_name(split, static_cast<int64_t>(k))) {
      throw f.bad(at + ".file", fmt::format("expected \"{}\", got \"{}\"",
                                            shard_file_name(split, static_cast<int64_t>(k)),
                                            e.file.substr(0, 60)));
    }
    e.docs = f.count(shards[k], "docs", at);
    e.text_bytes = f.count(shards[k], "text_bytes", at);
    e.tokens = f.count(shards[k], "tokens", at, kMaxDataFileBytes / dtype);
    e.bytes = f.count(shards[k], "bytes", at);
    e.crc32 = f.crc(shards[k], "crc32", at);
    if (e.bytes != kTokenShardHeaderBytes + e.tokens * dtype) {
      throw f.bad(at, fmt::format("{} bytes do not hold a header and {} tokens of {} bytes",
                                  e.bytes, e.tokens, dtype));
    }
    out.shards.push_back(std::move(e));
  }
  const std::pair<const char*, int64_t> totals[] = {
      {"docs", out.docs()}, {"text_bytes", out.text_bytes()}, {"tokens", out.tokens()}};
  for (const auto& [key, sum] : totals) {
    const int64_t said = f.count(s, key, where, INT64_MAX);
    if (said != sum) {
      throw f.bad(where + "." + key, fmt::format("{}, but its shards add up to {}", said, sum));
    }
  }
  return out;
}

Json split_json(const SplitIndex& s) {
  Json shards = Json::array();
  for (const ShardEntry& e : s.shards) {
    shards.push_back({{"file", e.file},
                      {"docs", e.docs},
                      {"text_bytes", e.text_bytes},
                      {"tokens", e.tokens},
                      {"bytes", e.bytes},
                      {"crc32", hex32(e.crc32)}});
  }
  return {{"docs", s.docs()},
          {"text_bytes", s.text_bytes()},
          {"tokens", s.tokens()},
          {"shards", std::move(shards)}};
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// A file the index lists that is not there.
IoError listed_but_missing(const std::string& path) {
  return IoError(fmt::format("{}: listed in {} but missing (re-run `brigade tokenize`)", path,
                             kShardIndexFile));
}

// The message of a file whose size or CRC-32 is not what the index recorded.
IoError digest_mismatch(const std::string& path, int64_t bytes, uint32_t crc, int64_t want_bytes,
                        uint32_t want_crc) {
  return IoError(fmt::format(
      "{}: {} bytes with CRC-32 {}, but {} records {} bytes with CRC-32 {} (a damaged or "
      "replaced file; re-run `brigade tokenize`)",
      path, bytes, hex32(crc), kShardIndexFile, want_bytes, hex32(want_crc)));
}

// A regular file of the size the index recorded, judged by its metadata: nothing is read, so a
// link to a device or a sparse file of the wrong size is refused at once.
void check_size(const std::string& path, int64_t bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw listed_but_missing(path);
  if (!S_ISREG(st.st_mode)) {
    throw IoError(
        fmt::format("{}: not a regular file (a damaged or replaced file; re-run "
                    "`brigade tokenize`)",
                    path));
  }
  if (st.st_size != bytes) {
    throw IoError(fmt::format(
        "{}: {} bytes, but {} records {} bytes (a damaged or replaced file; re-run `brigade "
        "tokenize`)",
        path, static_cast<int64_t>(st.st_size), kShardIndexFile, bytes));
  }
}

// Size and CRC-32 of dir/file against what the index recorded.
void check_digest(const std::string& path, int64_t bytes, uint32_t crc) {
  if (!path_exists(path)) throw listed_but_missing(path);
  const FileDigest d = digest_file(path);
  if (d.bytes != bytes || d.crc32 != crc) throw digest_mismatch(path, d.bytes, d.crc32, bytes, crc);
}

// Maps every shard of a split, checking each against the index in one pass over its bytes:
// size, CRC-32 (before its header or ids are judged, so a damaged file is called damaged), the
// header's token count and vocabulary, and every id below the vocabulary.
std::vector<MappedTokenShard> open_split(const std::string& dir, const SplitIndex& split,
                                         uint32_t vocab, const SplitScan& scan,
                                         std::vector<std::string>& files) {
  // Every file's kind and size first (the index is untrusted), from its metadata alone: a missing,
  // truncated or replaced shard is named before any content is read.
  for (const ShardEntry& e : split.shards) check_size(dir + "/" + e.file, e.bytes);
  std::vector<MappedTokenShard> shards;
  shards.reserve(split.shards.size());
  for (const ShardEntry& e : split.shards) {
    const std::string path = dir + "/" + e.file;
    if (!path_exists(path)) check_digest(path, e.bytes, e.crc32);  // removed since: "missing"
    ShardScanOptions options{.verify_digest =
                                 [&](int64_t bytes, uint32_t crc) {
                                   if (bytes != e.bytes || crc != e.crc32) {
                                     throw digest_mismatch(path, bytes, crc, e.bytes, e.crc32);
                                   }
                                 },
                             .id_limit = scan.id_limit,
                             .id_counts = scan.id_counts};
    MappedTokenShard shard(path, options);
    const TokenShardInfo& info = shard.info();
    if (info.llmc || info.num_tokens != static_cast<uint64_t>(e.tokens) ||
        info.vocab_size != vocab) {
      throw IoError(fmt::format("{}: holds {} tokens of vocabulary {}, but {} records {} of {}",
                                path, info.num_tokens, info.vocab_size, kShardIndexFile, e.tokens,
                                vocab));
    }
    shards.push_back(std::move(shard));
    files.push_back(path);
  }
  return shards;
}

// Reads dir/index.json and checks the tokenizer file against it.
TokenShardIndex read_index_and_tokenizer(const std::string& dir, std::vector<std::string>& files) {
  const std::string path = dir + "/" + kShardIndexFile;
  TokenShardIndex index = parse_shard_index(read_file(path, kMaxShardIndexBytes), path);
  files.push_back(path);
  const std::string merges = dir + "/" + kTokenizerName;
  if (index.tokenizer == "bpe") {
    check_digest(merges, index.tokenizer_bytes, index.tokenizer_crc32);
    files.push_back(merges);
  } else if (path_exists(merges)) {
    throw IoError(
        fmt::format("{}: present, but {} records byte tokens (a stray file; remove it "
                    "or re-run `brigade tokenize`)",
                    merges, path));
  }
  return index;
}

// The tokens of mapped shards, concatenated.
std::vector<int32_t> concatenate(const std::vector<MappedTokenShard>& shards) {
  int64_t total = 0;
  for (const MappedTokenShard& s : shards) total += s.num_tokens();
  std::vector<int32_t> tokens(static_cast<size_t>(total));
  int64_t at = 0;
  for (const MappedTokenShard& s : shards) {
    s.copy(0, s.num_tokens(), tokens.data() + at);
    at += s.num_tokens();
  }
  return tokens;
}

}  // namespace

int64_t SplitIndex::docs() const {
  int64_t n = 0;
  for (const ShardEntry& e : shards) n += e.docs;
  return n;
}
int64_t SplitIndex::text_bytes() const {
  int64_t n = 0;
  for (const ShardEntry& e : shards) n += e.text_bytes;
  return n;
}
int64_t SplitIndex::tokens() const {
  int64_t n = 0;
  for (const ShardEntry& e : shards) n += e.tokens;
  return n;
}

std::string shard_file_name(std::string_view split, int64_t number) {
  return fmt::format("{}_{:06d}.bin", split, number);
}

bool is_tokenize_output_name(std::string_view name) {
  if (name.ends_with(".tmp")) name.remove_suffix(4);
  if (name == kShardIndexFile || name == kTokenizerName || name == "train.bin" ||
      name == "val.bin") {
    return true;
  }
  for (std::string_view split : kSplits) {
    // "<split>_" + six digits + ".bin"
    if (name.size() == split.size() + 11 && name.starts_with(split) && name[split.size()] == '_' &&
        name.ends_with(".bin") &&
        name.substr(split.size() + 1, 6).find_first_not_of("0123456789") == std::string::npos) {
      return true;
    }
  }
  return false;
}

bool has_numbered_shards(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string_view base =
        std::string_view(name).substr(0, name.ends_with(".tmp") ? name.size() - 4 : name.size());
    if (base != "train.bin" && base != "val.bin" && base.ends_with(".bin") &&
        is_tokenize_output_name(name)) {
      return true;
    }
  }
  return false;
}

std::string shard_index_json(const TokenShardIndex& index) {
  Json j = {{"format", kShardIndexFormat}, {"tokenizer", index.tokenizer}};
  if (index.tokenizer == "bpe") {
    j["tokenizer_bytes"] = index.tokenizer_bytes;
    j["tokenizer_crc32"] = hex32(index.tokenizer_crc32);
  }
  j["vocab"] = index.vocab;
  j["val_fraction"] = index.val_fraction;
  j["shard_text_bytes"] = index.shard_text_bytes;
  j["splits"] = {{"train", split_json(index.train)}, {"val", split_json(index.val)}};
  return j.dump(1) + "\n";
}

TokenShardIndex parse_shard_index(std::string_view text, const std::string& path) {
  const nlohmann::json j =
      parse_json_bounded(text, path, JsonLimits{.max_bytes = kMaxShardIndexBytes, .max_depth = 8});
  const Fields f(path);
  const int64_t format = f.count(j, "format", "index", 1 << 20);
  if (format != kShardIndexFormat) {
    throw f.bad("format",
                fmt::format("{} (this build reads format {})", format, kShardIndexFormat));
  }
  TokenShardIndex index;
  index.tokenizer = f.text(j, "tokenizer", "index");
  const int64_t vocab = f.count(j, "vocab", "index", BpeTokenizer::kMaxVocab);
  if (index.tokenizer == "bpe") {
    index.tokenizer_bytes =
        f.count(j, "tokenizer_bytes", "index", BpeTokenizer::kMaxMergesFileBytes);
    index.tokenizer_crc32 = f.crc(j, "tokenizer_crc32", "index");
    if (vocab < BpeTokenizer::kByteVocab) throw f.bad("vocab", std::to_string(vocab) + " < 256");
  } else if (index.tokenizer == "byte") {
    if (vocab != BpeTokenizer::kByteVocab) {
      throw f.bad("vocab", std::to_string(vocab) + " with byte tokens (expected 256)");
    }
  } else {
    throw f.bad("tokenizer", "\"" + index.tokenizer.substr(0, 40) + "\" (expected bpe or byte)");
  }
  index.vocab = static_cast<uint32_t>(vocab);
  const nlohmann::json& fraction = f.member(j, "val_fraction", "index");
  if (!fraction.is_number() || !(fraction.get<double>() >= 0 && fraction.get<double>() < 1)) {
    throw f.bad("val_fraction", "expected a number in [0, 1), got " + json_excerpt(fraction, 60));
  }
  index.val_fraction = fraction.get<double>();
  index.shard_text_bytes = f.count(j, "shard_text_bytes", "index");
  const nlohmann::json& splits = f.member(j, "splits", "index");
  index.train = parse_split(f, splits, "train", index.vocab);
  index.val = parse_split(f, splits, "val", index.vocab);
  return index;
}

IndexedShardFiles open_indexed_shards(const std::string& dir, const SplitScan& train_scan,
                                      const SplitScan& val_scan) {
  IndexedShardFiles out;
  out.index = read_index_and_tokenizer(dir, out.files);
  out.train = open_split(dir, out.index.train, out.index.vocab, train_scan, out.files);
  out.val = open_split(dir, out.index.val, out.index.vocab, val_scan, out.files);
  return out;
}

IndexedSplits read_indexed_shards(const std::string& dir) {
  IndexedShardFiles mapped = open_indexed_shards(dir);
  IndexedSplits out;
  out.index = std::move(mapped.index);
  out.train = concatenate(mapped.train);
  out.val = concatenate(mapped.val);
  out.files = std::move(mapped.files);
  return out;
}

}  // namespace brigade
