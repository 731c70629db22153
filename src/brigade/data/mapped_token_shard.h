#pragma once
// A token shard (data/token_shard.h, either format) mapped read-only, for token folders larger
// than memory: the tokens stay in the file, and copy() converts the few a batch needs to int32.
// The page cache holds what was read recently and can drop it under pressure; pages of this
// mapping count in the process's resident set (as RssFile) only while mapped in, so the
// opening pass unmaps each chunk after reading it and readers release() what they copied.
//
// Opening validates everything before the shard is used, in one pass over the mapped bytes (read
// once, never held): the header against the file's size (read_token_shard_info's checks), the
// CRC-32 of every byte for the caller to compare (the index's), every id below the header's
// vocabulary (read_token_shard's message: file and index), and optionally the first id at or
// above a caller's limit (a tokenizer's or the model's vocabulary, which the caller names) and
// a count per id. The file must not change while mapped: truncating it under a running job
// makes a read of the lost pages fault (SIGBUS), as with any mapping.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "brigade/data/token_shard.h"

namespace brigade {

struct ShardScanOptions {
  // Called with the file's size and CRC-32 (of all its bytes) after the pass and before any
  // error of the header or the tokens is thrown, so that a damaged file is reported as damaged
  // (shard_index.h compares them with the index). May throw. Empty: no CRC is computed.
  std::function<void(int64_t bytes, uint32_t crc32)> verify_digest = {};
  // Ids >= id_limit that the header allows are not refused here: the first is recorded
  // (first_id_over_limit()) for the caller to name. 0: no limit beyond the header's.
  uint64_t id_limit = 0;
  // When given, (*id_counts)[id] += the occurrences of id, for every id < id_limit (the vector
  // must hold id_limit entries; id_limit > 0).
  std::vector<uint64_t>* id_counts = nullptr;
};

// The first id at or above ShardScanOptions::id_limit in a shard: its index and value.
struct IdOverLimit {
  int64_t index = -1;  // -1: none
  uint64_t id = 0;
};

class MappedTokenShard {
 public:
  // Maps path and makes the opening pass described above. IoError naming path if it cannot be
  // opened or mapped, is not a regular file, its header is bad, or it holds an id the header
  // does not allow (the first one, with its index); or what verify_digest throws.
  explicit MappedTokenShard(const std::string& path, const ShardScanOptions& options = {});
  ~MappedTokenShard();
  MappedTokenShard(MappedTokenShard&& other) noexcept;
  MappedTokenShard& operator=(MappedTokenShard&& other) noexcept;
  MappedTokenShard(const MappedTokenShard&) = delete;
  MappedTokenShard& operator=(const MappedTokenShard&) = delete;

  const std::string& path() const { return path_; }
  const TokenShardInfo& info() const { return info_; }
  int64_t num_tokens() const { return static_cast<int64_t>(info_.num_tokens); }
  IdOverLimit first_id_over_limit() const { return over_limit_; }

  // Writes tokens [first, first + n) of this shard into out as int32 (0 <= first, first + n <=
  // num_tokens()). Allocates nothing.
  void copy(int64_t first, int64_t n, int32_t* out) const;

  // Unmaps the pages holding tokens [first, first + n) from this process (the page cache keeps
  // them; a later copy maps them again), rounded out to kReleaseBytes: a fault maps a whole
  // page-cache folio, up to 2 MiB, so without this a run's resident memory would grow towards
  // the size of the data it has sampled.
  void release(int64_t first, int64_t n) const;
  static constexpr uint64_t kReleaseBytes = uint64_t{2} << 20;

 private:
  void unmap();

  std::string path_;
  const unsigned char* data_ = nullptr;  // the whole file, or null for an empty one
  uint64_t bytes_ = 0;
  TokenShardInfo info_;
  IdOverLimit over_limit_;
};

}  // namespace brigade
