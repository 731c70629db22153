#pragma once
// Token shard: a flat binary file of token ids, what the GPT loader reads.
//
// Layout (all integers little-endian):
//   offset  0  char[8]  magic "BRGDTOK1"
//   offset  8  uint32   format version (kTokenShardVersion)
//   offset 12  uint32   dtype: bytes per token, 2 (uint16) or 4 (uint32)
//   offset 16  uint64   token count
//   offset 24  uint32   vocab size (every token is below it)
//   offset 28  zeros up to kTokenShardHeaderBytes
//   offset 64  the tokens
//
// llm.c / nanoGPT token files load too (read_token_shard detects them by their magic): a header of
// 256 little-endian int32 (1024 bytes): [0] magic 20240520 with [1] version 1 and uint16 tokens
// (GPT-2), or magic 20240801 with version 7 and uint32 tokens (Llama 3); [2] the token count;
// then the tokens. They record no vocabulary (vocab_size = 0 in their TokenShardInfo): the
// caller checks their ids against the model's.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brigade {

inline constexpr char kTokenShardMagic[8] = {'B', 'R', 'G', 'D', 'T', 'O', 'K', '1'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderBytes = 64;

inline constexpr int64_t kLlmcHeaderBytes = 1024;
inline constexpr uint32_t kLlmcMagicGpt2 = 20240520;    // version 1, uint16 tokens
inline constexpr uint32_t kLlmcMagicLlama3 = 20240801;  // version 7, uint32 tokens

struct TokenShardInfo {
  uint32_t dtype_bytes = 0;  // 2 or 4
  uint64_t num_tokens = 0;
  uint32_t vocab_size = 0;  // 0: not recorded (an llm.c file)
  int64_t header_bytes = kTokenShardHeaderBytes;
  bool llmc = false;  // an llm.c / nanoGPT file
};

// The bytes of a shard of tokens: uint16 when vocab_size <= 65536, else uint32. Every token must
// be in [0, vocab_size).
std::string token_shard_bytes(std::span<const int32_t> tokens, uint32_t vocab_size);

// Writes tokens as uint16 when vocab_size <= 65536, else uint32, atomically (tmp + rename).
// Every token must be in [0, vocab_size). IoError naming the path if the write fails.
void write_token_shard(const std::string& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size);

// Reads and validates the header only: magic, version, dtype, vocab size, and that the file
// size equals header + count * dtype. IoError naming the path on any mismatch. Either format.
TokenShardInfo read_token_shard_info(const std::string& path);

// The same checks on a header already in memory: h holds the first `got` bytes of path, a file
// of file_size bytes (got = min(file_size, kLlmcHeaderBytes) is enough for either format).
TokenShardInfo parse_token_shard_header(const std::string& path, const char* h, size_t got,
                                        uint64_t file_size);

// The largest id a shard may hold: its header's vocabulary minus one, or for an llm.c file (no
// vocabulary recorded) the largest int32.
inline uint64_t max_token_id(const TokenShardInfo& info) {
  return info.vocab_size > 0 ? info.vocab_size - 1 : uint64_t{0x7fffffff};
}

// The message of a token above max_token_id(info) at index i of path (read_token_shard's).
std::string bad_token_message(const std::string& path, uint64_t token, uint64_t index,
                              const TokenShardInfo& info);

// Reads the whole shard, validating the header as above and that every token < vocab size
// (when the file records one).
// IoError naming the path on any mismatch. If info is given it receives the header.
std::vector<int32_t> read_token_shard(const std::string& path, TokenShardInfo* info = nullptr);

}  // namespace brigade
