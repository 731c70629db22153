#include "brigade/comm/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "brigade/base/error.h"

namespace brigade {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void validate_key(const std::string& key) {
  if (key.empty() || static_cast<int64_t>(key.size()) > detail::kMaxStoreKeyBytes) {
    throw ConfigError("store key must have 1.." + std::to_string(detail::kMaxStoreKeyBytes) +
                      " bytes, got " + std::to_string(key.size()));
  }
}

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileStore::FileStore(std::string dir, std::chrono::milliseconds timeout)
    : Store(timeout), dir_(std::move(dir)) {
  // A folder we create is private (0700, whatever the umask): its permissions are what keeps
  // other users out of the rendezvous. Parents are created as usual; a folder that exists
  // already (the launcher's, made 0700 by mkdtemp, or one shared on purpose) is left as it is.
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) {
    std::filesystem::path path = std::filesystem::path(dir_).lexically_normal();
    if (!path.has_filename()) path = path.parent_path();  // "a/b/" -> "a/b"
    const std::filesystem::path parent = path.parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (::mkdir(path.c_str(), 0700) == 0) {
      ::chmod(path.c_str(), 0700);  // mkdir's mode is masked by the umask; be exact
    } else if (errno != EEXIST) {
      throw IoError("file store: cannot create directory " + dir_ + ": " + errno_text());
    }
  }
  if (!std::filesystem::is_directory(dir_, ec)) {
    throw IoError("file store: " + dir_ + " is not a directory");
  }
}

std::string FileStore::path_for(const std::string& key) const {
  static const char* kHex = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  if (name.size() > 200) {
    // File names are limited to 255 bytes: keep a readable head plus a hash of the full key.
    char buf[24];
    std::snprintf(buf, sizeof(buf), "~%016llx", static_cast<unsigned long long>(fnv1a(key)));
    name = name.substr(0, 180) + buf;
  }
  return dir_ + "/" + name;
}

void FileStore::write_atomically(const std::string& path, const std::vector<char>& value) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  const std::string tmp = dir_ + "/.tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(salt & 0xffffff) + "." + std::to_string(counter++);
  Fd f;
  f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (f.fd < 0) throw IoError("file store: cannot create " + tmp + ": " + errno_text());
  size_t done = 0;
  while (done < value.size()) {
    ssize_t w = ::write(f.fd, value.data() + done, value.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::string err = errno_text();
      ::unlink(tmp.c_str());
      throw IoError("file store: cannot write " + tmp + ": " + err);
    }
    done += static_cast<size_t>(w);
  }
  ::close(f.fd);
  f.fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw IoError("file store: cannot rename " + tmp + " to " + path + ": " + err);
  }
}

bool FileStore::read_file(const std::string& path, std::vector<char>* out) const {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    if (errno == ENOENT) return false;
    throw IoError("file store: cannot open " + path + ": " + errno_text());
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) throw IoError("file store: cannot stat " + path);
  if (st.st_size < 0 || st.st_size > detail::kMaxStoreValueBytes) {
    throw IoError("file store: " + path + " has " + std::to_string(st.st_size) +
                  " bytes, more than the limit of " + std::to_string(detail::kMaxStoreValueBytes));
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t r = ::read(f.fd, out->data() + done, out->size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw IoError("file store: cannot read " + path + ": " + errno_text());
    if (r == 0) break;  // the file is immutable once renamed in; a short read means truncation
    done += static_cast<size_t>(r);
  }
  if (done != out->size()) throw IoError("file store: " + path + " was truncated while reading");
  return true;
}

void FileStore::set(const std::string& key, const std::vector<char>& value) {
  validate_key(key);
  if (static_cast<int64_t>(value.size()) > detail::kMaxStoreValueBytes) {
    throw ConfigError("file store: value for '" + key + "' has " + std::to_string(value.size()) +
                      " bytes, more than the limit of " +
                      std::to_string(detail::kMaxStoreValueBytes));
  }
  write_atomically(path_for(key), value);
}

std::vector<char> FileStore::get(const std::string& key) {
  validate_key(key);
  wait({key}, timeout());
  std::vector<char> value;
  if (!read_file(path_for(key), &value)) {
    throw IoError("file store: " + path_for(key) + " disappeared after it was written");
  }
  return value;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    validate_key(key);
    if (::access(path_for(key).c_str(), F_OK) != 0) return false;
  }
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const auto start = std::chrono::steady_clock::now();
  auto sleep = std::chrono::milliseconds(1);
  while (!check(keys)) {
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed >= timeout) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        if (!check({k})) missing.push_back(k);
      }
      throw CommError(CommError::Kind::kTimeout,
                      describe() + ": timed out after " + std::to_string(timeout.count()) +
                          " ms waiting for key(s) " + detail::format_keys(missing));
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(20));
  }
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  validate_key(key);
  const std::string path = path_for(key);
  const std::string lock_path = path + ".lock";
  Fd lock;
  lock.fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock.fd < 0) throw IoError("file store: cannot open " + lock_path + ": " + errno_text());
  while (::flock(lock.fd, LOCK_EX) != 0) {
    if (errno != EINTR) throw IoError("file store: cannot lock " + lock_path + ": " + errno_text());
  }
  int64_t value = 0;
  std::vector<char> old;
  if (read_file(path, &old)) {
    if (!detail::parse_int64(std::string(old.begin(), old.end()), &value)) {
      throw IoError("file store: " + path + " does not hold an integer (add on a non-counter key)");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    throw CommError(CommError::Kind::kOther,
                    describe() + ": " + detail::add_overflow_message(key, value, delta));
  }
  std::string text = std::to_string(sum);
  write_atomically(path, std::vector<char>(text.begin(), text.end()));
  ::flock(lock.fd, LOCK_UN);
  return sum;
}

}  // namespace brigade
