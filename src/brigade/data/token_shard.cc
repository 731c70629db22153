#include "brigade/data/token_shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

// Tokens converted per read: 4 MiB of uint32 at a time.
constexpr uint64_t kReadChunkTokens = uint64_t{1} << 20;

// Parses and validates a header against the file's total size.
TokenShardInfo parse_header(const std::string& path, const char* h, uint64_t file_size) {
  auto bad = [&](const std::string& why) { return IoError(path + ": bad token shard: " + why); };
  if (file_size < static_cast<uint64_t>(kTokenShardHeaderBytes)) {
    throw bad("file has " + std::to_string(file_size) + " bytes, less than the " +
              std::to_string(kTokenShardHeaderBytes) + "-byte header");
  }
  if (file_size > static_cast<uint64_t>(kMaxDataFileBytes)) {
    throw bad("file has " + std::to_string(file_size) + " bytes, more than the limit of " +
              std::to_string(kMaxDataFileBytes));
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

// An llm.c / nanoGPT header (token_shard.h), validated against the file's total size.
TokenShardInfo parse_llmc_header(const std::string& path, const char* h, uint64_t file_size) {
  auto bad = [&](const std::string& why) {
    return IoError(path + ": bad llm.c token file: " + why);
  };
  if (file_size < static_cast<uint64_t>(kLlmcHeaderBytes)) {
    throw bad("file has " + std::to_string(file_size) + " bytes, less than the 1024-byte header");
  }
  if (file_size > static_cast<uint64_t>(kMaxDataFileBytes)) {
    throw bad("file has " + std::to_string(file_size) + " bytes, more than the limit of " +
              std::to_string(kMaxDataFileBytes));
  }
  const uint32_t magic = static_cast<uint32_t>(get_le(h, 4));
  const uint32_t version = static_cast<uint32_t>(get_le(h + 4, 4));
  TokenShardInfo info;
  info.llmc = true;
  info.header_bytes = kLlmcHeaderBytes;
  if (magic == kLlmcMagicGpt2 && version == 1) {
    info.dtype_bytes = 2;
  } else if (magic == kLlmcMagicLlama3 && version == 7) {
    info.dtype_bytes = 4;
  } else {
    throw bad("magic " + std::to_string(magic) + " with version " + std::to_string(version) +
              " (known: 20240520 version 1, 20240801 version 7)");
  }
  const int64_t count = static_cast<int32_t>(get_le(h + 8, 4));
  if (count < 0) throw bad("a negative token count " + std::to_string(count));
  info.num_tokens = static_cast<uint64_t>(count);
  const uint64_t payload = file_size - kLlmcHeaderBytes;
  if (payload % info.dtype_bytes != 0 || payload / info.dtype_bytes != info.num_tokens) {
    throw bad("header says " + std::to_string(info.num_tokens) + " tokens of " +
              std::to_string(info.dtype_bytes) + " bytes but the file holds " +
              std::to_string(payload) + " bytes after the header (truncated?)");
  }
  return info;
}

bool is_llmc_magic(const char* h, size_t got) {
  if (got < 4) return false;
  const uint32_t magic = static_cast<uint32_t>(get_le(h, 4));
  return magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3;
}

}  // namespace

std::string token_shard_bytes(std::span<const int32_t> tokens, uint32_t vocab_size) {
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
  return bytes;
}

void write_token_shard(const std::string& path, std::span<const int32_t> tokens,
                       uint32_t vocab_size) {
  write_file_atomic(path, token_shard_bytes(tokens, vocab_size));
}

namespace {

// An open shard file: its descriptor and size, checked to be a regular file.
class ShardFile {
 public:
  explicit ShardFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw IoError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    const bool ok = ::fstat(fd_, &st) == 0;
    const int err = errno;
    if (!ok || !S_ISREG(st.st_mode)) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw IoError(path + (ok ? ": not a regular file" : ": cannot stat: ") +
                    (ok ? "" : std::strerror(err)));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ShardFile() { ::close(fd_); }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  uint64_t size() const { return size_; }

  // Reads up to n bytes at offset; returns how many (fewer only at the end of the file).
  size_t read_at(char* out, size_t n, uint64_t offset) const {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw IoError(path_ + ": cannot read: " + std::strerror(errno));
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  // The header, validated against the file's size before anything else is read.
  TokenShardInfo header() const {
    char h[kLlmcHeaderBytes] = {};
    const size_t got = read_at(h, sizeof(h), 0);
    return parse_token_shard_header(path_, h, got, size_);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

TokenShardInfo parse_token_shard_header(const std::string& path, const char* h, size_t got,
                                        uint64_t file_size) {
  // A short read means a file shorter than the header; the parsers report it.
  if (is_llmc_magic(h, got)) {
    return parse_llmc_header(path, h,
                             got < static_cast<size_t>(kLlmcHeaderBytes) ? got : file_size);
  }
  return parse_header(path, h, got < static_cast<size_t>(kTokenShardHeaderBytes) ? got : file_size);
}

std::string bad_token_message(const std::string& path, uint64_t token, uint64_t index,
                              const TokenShardInfo& info) {
  return path + ": bad token shard: token " + std::to_string(token) + " at index " +
         std::to_string(index) + " >= vocab size " + std::to_string(info.vocab_size);
}

TokenShardInfo read_token_shard_info(const std::string& path) {
  return ShardFile(path).header();
}

std::vector<int32_t> read_token_shard(const std::string& path, TokenShardInfo* info_out) {
  // Header and file size first: a file whose size disagrees with its header is refused before
  // its payload is read, and the payload is then read in bounded chunks straight into the
  // tokens (no second copy of a multi-GiB file).
  const ShardFile file(path);
  const TokenShardInfo info = file.header();
  const int dtype = static_cast<int>(info.dtype_bytes);
  std::vector<int32_t> tokens(info.num_tokens);
  std::vector<char> chunk(static_cast<size_t>(kReadChunkTokens) * dtype);
  for (uint64_t first = 0; first < info.num_tokens; first += kReadChunkTokens) {
    const uint64_t n = std::min<uint64_t>(kReadChunkTokens, info.num_tokens - first);
    const size_t want = static_cast<size_t>(n) * dtype;
    if (file.read_at(chunk.data(), want,
                     static_cast<uint64_t>(info.header_bytes) + first * dtype) != want) {
      throw IoError(path + ": bad token shard: file shrank while being read (truncated?)");
    }
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t t = get_le(chunk.data() + i * dtype, dtype);
      if (t > max_token_id(info)) throw IoError(bad_token_message(path, t, first + i, info));
      tokens[first + i] = static_cast<int32_t>(t);
    }
  }
  if (info_out != nullptr) *info_out = info;
  return tokens;
}

}  // namespace brigade
