#include "brigade/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <vector>

#include "brigade/base/error.h"

namespace brigade {

namespace detail {
namespace {

struct FaultState {
  std::mutex mu;
  std::optional<IoFault> fault;
  std::array<std::atomic<int64_t>, static_cast<size_t>(IoOp::kCount)> counts{};
};

FaultState& fault_state() {
  static FaultState state;
  return state;
}

// Counts a call of kind op on `path` and returns the errno it must fail with, or 0. torn is set
// when a failing write should first write half of its bytes. A fault with a path filter counts
// and fails only the calls on paths that contain it.
int injected_error(IoOp op, bool* torn, std::string_view path = {}) {
  FaultState& s = fault_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fault && s.fault->path_contains &&
      path.find(s.fault->path_contains) == std::string_view::npos) {
    return 0;
  }
  const int64_t n = ++s.counts[static_cast<size_t>(op)];
  if (!s.fault || s.fault->op != op) return 0;
  const bool hit = s.fault->once ? n == s.fault->nth : n >= s.fault->nth;
  if (!hit) return 0;
  if (torn) *torn = s.fault->torn && n == s.fault->nth;
  return s.fault->error;
}

}  // namespace

void set_io_fault(std::optional<IoFault> fault) {
  FaultState& s = fault_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fault = fault;
  for (auto& c : s.counts) c = 0;
}

int64_t io_op_count(IoOp op) {
  return fault_state().counts[static_cast<size_t>(op)].load();
}

}  // namespace detail

namespace {

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  throw IoError(what + " " + path + ": " + std::strerror(err));
}

// write(2) of all n bytes, retrying on EINTR and short writes. Returns 0 or an errno.
int raw_write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int write_all(int fd, const char* p, size_t n, detail::IoOp op = detail::IoOp::kWrite,
              std::string_view path = {}) {
  bool torn = false;
  if (int err = detail::injected_error(op, &torn, path)) {
    if (torn && n > 1) (void)raw_write_all(fd, p, n / 2);  // what a filling disk still takes
    return err;
  }
  return raw_write_all(fd, p, n);
}

int checked_fsync(int fd) {
  if (int err = detail::injected_error(detail::IoOp::kFsync, nullptr)) return err;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  // zlib takes a 32-bit length; feed it in chunks.
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, size_t{1} << 30);
    c = ::crc32(c, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

FileDigest digest_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path, errno);
  // A device or a pipe (a link to /dev/zero) has no end to digest.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + ": not a regular file");
  }
  std::vector<char> buf(size_t{1} << 20);
  FileDigest d;
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw_errno("cannot read", path, err);
    }
    if (r == 0) break;
    d.crc32 = crc32_update(d.crc32, buf.data(), static_cast<size_t>(r));
    d.bytes += r;
  }
  ::close(fd);
  return d;
}

DurableFileWriter::DurableFileWriter(std::string path, unsigned mode) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd_ < 0) throw_errno("cannot create", path_, errno);
  if (::fchmod(fd_, mode) != 0) throw_errno("cannot set the permissions of", path_, errno);
}

DurableFileWriter::~DurableFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFileWriter::append(const void* data, size_t n) {
  if (fd_ < 0) throw IoError("write to closed file " + path_);
  if (int err = write_all(fd_, static_cast<const char*>(data), n, detail::IoOp::kWrite, path_)) {
    throw_errno("cannot write", path_, err);
  }
  digest_.crc32 = crc32_update(digest_.crc32, data, n);
  digest_.bytes += static_cast<int64_t>(n);
}

FileDigest DurableFileWriter::close() {
  if (fd_ < 0) throw IoError("close of closed file " + path_);
  const int fd = fd_;
  fd_ = -1;
  if (int err = checked_fsync(fd)) {
    ::close(fd);
    throw_errno("cannot fsync", path_, err);
  }
  // close() can report a deferred write error (NFS); after a successful fsync it rarely does.
  if (::close(fd) != 0 && errno != EINTR) throw_errno("cannot close", path_, errno);
  return digest_;
}

AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno("cannot open", path_, errno);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

int AppendFile::append(std::string_view bytes) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const int err = write_all(fd_, bytes.data(), bytes.size(), detail::IoOp::kAppend, path_);
  if (err != 0 && before >= 0) (void)::ftruncate(fd_, before);  // drop the torn record
  return err;
}

FileDigest write_file_durable(const std::string& path, std::string_view bytes, unsigned mode) {
  DurableFileWriter w(path, mode);
  w.append(bytes);
  return w.close();
}

void write_file_atomic(const std::string& path, std::string_view bytes, unsigned mode) {
  const std::string tmp = path + ".tmp";
  write_file_durable(tmp, bytes, mode);
  rename_atomic(tmp, path);
  auto slash = path.find_last_of('/');
  fsync_dir(slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash)));
}

std::string read_file(const std::string& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw_errno("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError("not a regular file: " + path);
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    throw IoError("file too large: " + path + " has " + std::to_string(st.st_size) +
                  " bytes, limit " + std::to_string(max_bytes));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t r = ::read(fd, out.data() + done, out.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw_errno("cannot read", path, err);
    }
    if (r == 0) break;  // shrank while we read
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open directory", dir, errno);
  int err = checked_fsync(fd);
  ::close(fd);
  if (err) throw_errno("cannot fsync directory", dir, err);
}

void rename_atomic(const std::string& from, const std::string& to) {
  int err = detail::injected_error(detail::IoOp::kRename, nullptr);
  if (!err && ::rename(from.c_str(), to.c_str()) != 0) err = errno;
  if (err) throw IoError("cannot rename " + from + " to " + to + ": " + std::strerror(err));
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create directory " + dir + ": " + ec.message());
}

void remove_all(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw IoError("cannot remove " + path + ": " + ec.message());
}

}  // namespace brigade
