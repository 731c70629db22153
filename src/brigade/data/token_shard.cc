#include "brigade/data/token_shard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

// Explicit byte order so shards move between machines unchanged.
void put_le(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Parses and validates a header against the file's total size.
TokenShardInfo parse_header(const std::string& path, const char* h, uint64_t file_size) {
  auto bad = [&](const std::string& why) { return IoError(path + ": bad token shard: " + why); };
  if (file_size < static_cast<uint64_t>(kTokenShardHeaderBytes)) {
    throw bad("file has " + std::to_string(file_size) + " bytes, less than the " +
              std::to_string(kTokenShardHeaderBytes) + "-byte header");
  }
  if (std::memcmp(h, kTokenShardMagic, sizeof(kTokenShardMagic)) != 0) {
    throw bad("wrong magic (expected BRGDTOK1)");
  }
  const uint32_t version = static_cast<uint32_t>(get_le(h + 8, 4));
  if (version != kTokenShardVersion) {
    throw bad("unsupported version " + std::to_string(version) + " (expected " +
              std::to_string(kTokenShardVersion) + ")");
  }
  TokenShardInfo info;
  info.dtype_bytes = static_cast<uint32_t>(get_le(h + 12, 4));
  info.num_tokens = get_le(h + 16, 8);
  info.vocab_size = static_cast<uint32_t>(get_le(h + 24, 4));
  if (info.dtype_bytes != 2 && info.dtype_bytes != 4) {
    throw bad("dtype " + std::to_string(info.dtype_bytes) + " (expected 2 or 4)");
  }
  if (info.vocab_size == 0 || info.vocab_size > (uint32_t{1} << 31) ||
      (info.dtype_bytes == 2 && info.vocab_size > 65536)) {
    throw bad("vocab size " + std::to_string(info.vocab_size) + " does not fit dtype " +
              std::to_string(info.dtype_bytes));
  }
  const uint64_t payload = file_size - kTokenShardHeaderBytes;
  // Divide rather than multiply: the count is untrusted and could overflow.
  if (payload % info.dtype_bytes != 0 || payload / info.dtype_bytes != info.num_tokens) {
    throw bad("header says " + std::to_string(info.num_tokens) + " tokens of " +
              std::to_string(info.dtype_bytes) + " bytes but the file holds " +
              std::to_string(payload) + " bytes after the header (truncated?)");
  }
  return info;
}

}  // namespace

void write_token_shard(const std::string& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size) {
  BRIGADE_CHECK(vocab_size > 0 && vocab_size <= (uint32_t{1} << 31)) << "vocab " << vocab_size;
  const uint32_t dtype = vocab_size <= 65536 ? 2 : 4;
  std::string bytes(kTokenShardHeaderBytes + tokens.size() * dtype, '\0');
  char* h = bytes.data();
  std::memcpy(h, kTokenShardMagic, sizeof(kTokenShardMagic));
  put_le(h + 8, kTokenShardVersion, 4);
  put_le(h + 12, dtype, 4);
  put_le(h + 16, tokens.size(), 8);
  put_le(h + 24, vocab_size, 4);
  char* p = h + kTokenShardHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    BRIGADE_CHECK(tokens[i] >= 0 && static_cast<uint32_t>(tokens[i]) < vocab_size)
        << "token " << tokens[i] << " at " << i << " outside vocab " << vocab_size;
    put_le(p + i * dtype, static_cast<uint32_t>(tokens[i]), static_cast<int>(dtype));
  }
  write_file_atomic(path, bytes);
}

TokenShardInfo read_token_shard_info(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw IoError(path + ": no such file");
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path + ": cannot stat: " + ec.message());
  char h[kTokenShardHeaderBytes] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw IoError(path + ": cannot open");
  const size_t got = std::fread(h, 1, sizeof(h), f);
  std::fclose(f);
  // A short read means a file shorter than the header; parse_header reports it.
  return parse_header(path, h, got < sizeof(h) ? got : size);
}

std::vector<int32_t> read_token_shard(const std::string& path, TokenShardInfo* info_out) {
  const std::string bytes = read_file(path, kMaxDataFileBytes);
  const TokenShardInfo info = parse_header(path, bytes.data(), bytes.size());
  std::vector<int32_t> tokens(info.num_tokens);
  const char* p = bytes.data() + kTokenShardHeaderBytes;
  const int dtype = static_cast<int>(info.dtype_bytes);
  for (uint64_t i = 0; i < info.num_tokens; ++i) {
    const uint64_t t = get_le(p + i * dtype, dtype);
    if (t >= info.vocab_size) {
      throw IoError(path + ": bad token shard: token " + std::to_string(t) + " at index " +
                    std::to_string(i) + " >= vocab size " + std::to_string(info.vocab_size));
    }
    tokens[i] = static_cast<int32_t>(t);
  }
  if (info_out != nullptr) *info_out = info;
  return tokens;
}

}  // namespace brigade
