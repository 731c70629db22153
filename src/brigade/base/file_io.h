#pragma once
// Small POSIX file helpers (checkpoints, data files, run manifests): durable writes (data reaches
// the disk before we say so), directory fsync, atomic rename, whole-file reads and CRC-32 digests.
// Every failure throws IoError naming the path and strerror(errno).
//
// Durability recipe (what ext4/xfs need for a crash-safe commit): write the file, fsync it,
// fsync the directory that holds its name, and only then rename something that points at it.
//
// All write/fsync/rename calls go through one wrapper so tests can inject failures (e.g. the
// 3rd write fails with ENOSPC), the way leveldb wraps its Env in fault-injection tests.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace brigade {

// CRC-32 (zlib's polynomial, as in gzip and PNG). It detects torn writes, truncation and bit
// rot cheaply (~1 GB/s); it is NOT a defence against deliberate tampering.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32_of(const void* data, size_t n) {
  return crc32_update(0, data, n);
}
inline uint32_t crc32_of(std::string_view bytes) {
  return crc32_of(bytes.data(), bytes.size());
}

// Size and CRC-32 of a file's full content.
struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  bool operator==(const FileDigest&) const = default;
};

// Streams the file (1 MiB at a time) and returns its size and CRC-32. IoError for anything but a
// regular file (a device such as /dev/zero would never end).
FileDigest digest_file(const std::string& path);

// Writes a new file sequentially while computing its digest; close() fsyncs it. The digest is
// of the bytes we handed to the kernel, so a reader that recomputes it catches anything the
// disk lost or flipped. A writer destroyed without close() closes the file without fsync
// (the caller is unwinding from an error; the partial file is garbage either way).
class DurableFileWriter {
 public:
  // Creates or truncates `path` with permissions `mode` (also when it existed with others).
  explicit DurableFileWriter(std::string path, unsigned mode = 0644);
  ~DurableFileWriter();
  DurableFileWriter(const DurableFileWriter&) = delete;
  DurableFileWriter& operator=(const DurableFileWriter&) = delete;

  void append(const void* data, size_t n);
  void append(std::string_view bytes) { append(bytes.data(), bytes.size()); }
  // fsync + close. Returns the digest of everything appended.
  FileDigest close();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  FileDigest digest_;
};

// Appends whole records (lines of a log or of metrics.jsonl) to a file opened with O_APPEND.
// A failed append is returned, not thrown, so that a full disk never stops training; its
// partial bytes are cut off again, so the file keeps only whole records.
class AppendFile {
 public:
  explicit AppendFile(std::string path);  // opens or creates it (0644); throws IoError
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // Writes `bytes` at the end of the file: 0, or the errno of the failed write.
  int append(std::string_view bytes);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Writes `bytes` to `path` (replacing it) and fsyncs the file. Does not fsync the directory.
FileDigest write_file_durable(const std::string& path, std::string_view bytes,
                              unsigned mode = 0644);

// Writes `bytes` to path + ".tmp", fsyncs it, renames it over `path` and fsyncs the folder:
// a reader sees the old file or the complete new one, never a torn write. mode 0600 keeps a
// file with secrets to its owner.
void write_file_atomic(const std::string& path, std::string_view bytes, unsigned mode = 0644);

// Size guard for data files (corpora, token shards), which may be large.
inline constexpr int64_t kMaxDataFileBytes = int64_t{1} << 40;

// Reads a whole file. Refuses files larger than max_bytes (a guard against reading a huge or
// wrong file into memory).
std::string read_file(const std::string& path, int64_t max_bytes = int64_t{1} << 30);

// fsync on a directory: makes the names created/renamed/removed in it durable.
void fsync_dir(const std::string& dir);

// rename(2): atomically replaces `to` (a file, or an empty directory) with `from`. Both must be
// on the same file system. Does not fsync the parent; call fsync_dir afterwards.
void rename_atomic(const std::string& from, const std::string& to);

// mkdir -p. Existing directories are fine.
void make_dirs(const std::string& dir);

// rm -rf. A missing path is fine.
void remove_all(const std::string& path);

namespace detail {

// Fault injection for tests. The kinds of call that can be made to fail: kWrite is every
// write but AppendFile's, which are kAppend (so records of a log can fail apart from files).
enum class IoOp { kWrite, kFsync, kRename, kAppend, kCount };

// Makes the nth call (1-based, counted since set_io_fault) of kind `op` fail with `error`.
// A failing write with torn=true first writes half of its bytes, as a disk that fills up
// mid-write does. Every later call of that kind fails too (a full disk stays full) unless
// once=true.
struct IoFault {
  IoOp op = IoOp::kWrite;
  int64_t nth = 1;
  int error = ENOSPC;
  bool torn = true;
  bool once = false;
  // Non-null: only writes to files whose path contains this are counted and failed (one file
  // of several a run appends to, say metrics.jsonl but not the TensorBoard events).
  const char* path_contains = nullptr;  // a literal: it must outlive the fault
};

// Installs (or with nullopt removes) the fault and resets the call counters. Thread-safe.
void set_io_fault(std::optional<IoFault> fault);

// Calls of kind `op` made since the last set_io_fault: lets a test count the writes of an
// operation and then fail each of them in turn.
int64_t io_op_count(IoOp op);

// Installs a fault for the lifetime of the object.
class ScopedIoFault {
 public:
  explicit ScopedIoFault(IoFault fault) { set_io_fault(fault); }
  ~ScopedIoFault() { set_io_fault(std::nullopt); }
  ScopedIoFault(const ScopedIoFault&) = delete;
  ScopedIoFault& operator=(const ScopedIoFault&) = delete;
};

}  // namespace detail
}  // namespace brigade
