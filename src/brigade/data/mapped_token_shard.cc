#include "brigade/data/mapped_token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

// The opening pass reads this much, then unmaps it: a multiple of the page size and of both
// token widths, so no token straddles two chunks.
constexpr uint64_t kScanChunkBytes = uint64_t{8} << 20;

// Token i of a little-endian array of T at p.
template <typename T>
T load_le(const unsigned char* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  if constexpr (std::endian::native == std::endian::big) {
    if constexpr (sizeof(T) == 2) v = __builtin_bswap16(v);
    if constexpr (sizeof(T) == 4) v = __builtin_bswap32(v);
  }
  return v;
}

// What the pass over one shard's tokens has found so far.
struct TokenCheck {
  uint64_t limit = 0;   // ids >= limit are looked at one by one
  uint64_t max_id = 0;  // the header's largest allowed id
  std::vector<uint64_t>* counts = nullptr;
  IdOverLimit over;        // the first id in [limit, max_id]
  int64_t bad_index = -1;  // the first id above max_id, which refuses the file
  uint64_t bad_id = 0;
};

// Checks count tokens of type T at p, the first of which is token `first` of the shard.
template <typename T>
void check_tokens(const unsigned char* p, uint64_t count, uint64_t first, TokenCheck& c) {
  // The common case, every id below the limit, is a max over the chunk (vectorised).
  T largest = 0;
  for (uint64_t i = 0; i < count; ++i) largest = std::max(largest, load_le<T>(p, i));
  if (largest < c.limit) {
    if (c.counts != nullptr) {
      uint64_t* counts = c.counts->data();
      for (uint64_t i = 0; i < count; ++i) ++counts[load_le<T>(p, i)];
    }
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t id = load_le<T>(p, i);
    if (id < c.limit) {
      if (c.counts != nullptr) ++(*c.counts)[id];
      continue;
    }
    if (id > c.max_id) {
      c.bad_index = static_cast<int64_t>(first + i);
      c.bad_id = id;
      return;
    }
    if (c.over.index < 0) c.over = {static_cast<int64_t>(first + i), id};
  }
}

}  // namespace

MappedTokenShard::MappedTokenShard(const std::string& path, const ShardScanOptions& options)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0;
  const int stat_err = errno;
  if (!ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + (ok ? ": not a regular file" : ": cannot stat: ") +
                  (ok ? "" : std::strerror(stat_err)));
  }
  bytes_ = static_cast<uint64_t>(st.st_size);
  if (bytes_ > 0) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file
    if (p == MAP_FAILED) {
      throw IoError(path + ": cannot map " + std::to_string(bytes_) +
                    " bytes: " + std::strerror(err) +
                    (err == ENOMEM ? " (too many mapped files? see vm.max_map_count)" : ""));
    }
    data_ = static_cast<const unsigned char*>(p);
  } else {
    ::close(fd);
  }

  // The header first, from the mapping; an error in it waits for the digest.
  char head[kLlmcHeaderBytes] = {};
  const size_t got = static_cast<size_t>(std::min<uint64_t>(bytes_, sizeof(head)));
  if (got > 0) std::memcpy(head, data_, got);
  std::optional<IoError> header_error;
  try {
    info_ = parse_token_shard_header(path_, head, got, bytes_);
  } catch (const IoError& e) {
    header_error = e;
  }
  const bool want_crc = static_cast<bool>(options.verify_digest);
  if (header_error && !want_crc) {
    unmap();
    throw *header_error;
  }

  TokenCheck check;
  check.max_id = max_token_id(info_);
  check.limit = check.max_id + 1;
  if (options.id_limit > 0) check.limit = std::min(check.limit, options.id_limit);
  check.counts = options.id_counts;
  if (check.counts != nullptr) {
    BRIGADE_CHECK(options.id_limit > 0 && check.counts->size() >= options.id_limit)
        << "id_counts holds " << check.counts->size() << " entries for id_limit "
        << options.id_limit;
  }
  const uint64_t dtype = info_.dtype_bytes;
  const uint64_t tokens_at = static_cast<uint64_t>(info_.header_bytes);
  auto* base = const_cast<unsigned char*>(data_);
  if (bytes_ > 0) ::madvise(base, bytes_, MADV_SEQUENTIAL);
  uint32_t crc = 0;
  for (uint64_t at = 0; at < bytes_; at += kScanChunkBytes) {
    const uint64_t n = std::min(kScanChunkBytes, bytes_ - at);
    if (want_crc) crc = crc32_update(crc, data_ + at, static_cast<size_t>(n));
    const uint64_t lo = std::max(at, tokens_at);
    if (!header_error && check.bad_index < 0 && lo < at + n) {
      const uint64_t count = (at + n - lo) / dtype;
      const uint64_t first = (lo - tokens_at) / dtype;
      if (dtype == 2) {
        check_tokens<uint16_t>(data_ + lo, count, first, check);
      } else {
        check_tokens<uint32_t>(data_ + lo, count, first, check);
      }
    }
    // Read once: drop the chunk from this process (the page cache keeps it while it can).
    ::madvise(base + at, static_cast<size_t>(n), MADV_DONTNEED);
    if (!want_crc && check.bad_index >= 0) break;
  }
  // Training reads windows in a random order: no readahead around each.
  if (bytes_ > 0) ::madvise(base, bytes_, MADV_RANDOM);
  try {
    if (want_crc) options.verify_digest(static_cast<int64_t>(bytes_), crc);
    if (header_error) throw *header_error;
    if (check.bad_index >= 0) {
      throw IoError(
          bad_token_message(path_, check.bad_id, static_cast<uint64_t>(check.bad_index), info_));
    }
  } catch (...) {
    unmap();
    throw;
  }
  over_limit_ = check.over;
}

MappedTokenShard::~MappedTokenShard() {
  unmap();
}

MappedTokenShard::MappedTokenShard(MappedTokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      info_(other.info_),
      over_limit_(other.over_limit_) {}

MappedTokenShard& MappedTokenShard::operator=(MappedTokenShard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    info_ = other.info_;
    over_limit_ = other.over_limit_;
  }
  return *this;
}

void MappedTokenShard::unmap() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

void MappedTokenShard::copy(int64_t first, int64_t n, int32_t* out) const {
  BRIGADE_CHECK(first >= 0 && n >= 0 && first + n <= num_tokens())
      << "tokens [" << first << ", " << first + n << ") of " << num_tokens() << " in " << path_;
  const unsigned char* p = data_ + info_.header_bytes + first * info_.dtype_bytes;
  // Ids were checked at open: every one fits an int32.
  if (info_.dtype_bytes == 2) {
    for (int64_t i = 0; i < n; ++i) out[i] = load_le<uint16_t>(p, static_cast<uint64_t>(i));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<int32_t>(load_le<uint32_t>(p, static_cast<uint64_t>(i)));
    }
  }
}

void MappedTokenShard::release(int64_t first, int64_t n) const {
  if (data_ == nullptr || n <= 0) return;
  const uint64_t begin = static_cast<uint64_t>(info_.header_bytes + first * info_.dtype_bytes);
  const uint64_t end = static_cast<uint64_t>(info_.header_bytes + (first + n) * info_.dtype_bytes);
  // The mapping starts page- (so kReleaseBytes-relative) aligned; round out within it.
  const uint64_t lo = begin / kReleaseBytes * kReleaseBytes;
  const uint64_t hi = std::min(bytes_, (end + kReleaseBytes - 1) / kReleaseBytes * kReleaseBytes);
  ::madvise(const_cast<unsigned char*>(data_) + lo, static_cast<size_t>(hi - lo), MADV_DONTNEED);
}

}  // namespace brigade
