#pragma once
// Test helpers for ckpt tests: a fresh temporary directory per test, raw file access, and
// an assertion that an exception's message names what it should.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace brigade::testing {

// mkdtemp under /tmp; removed (recursively) when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/brigade-ckpt-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// XORs one bit of the byte at `offset` (negative: from the end).
inline void flip_bit(const std::string& path, int64_t offset, int bit = 0) {
  std::string bytes = read_raw(path);
  const int64_t at = offset < 0 ? static_cast<int64_t>(bytes.size()) + offset : offset;
  bytes.at(static_cast<size_t>(at)) ^= static_cast<char>(1 << bit);
  write_raw(path, bytes);
}

inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace brigade::testing

// Expects `stmt` to throw `type` whose what() contains every string in the list.
#define EXPECT_THROW_WITH(stmt, type, ...)                                      \
  do {                                                                          \
    try {                                                                       \
      stmt;                                                                     \
      ADD_FAILURE() << "expected " #type " from: " #stmt;                       \
    } catch (const type& e) {                                                   \
      for (const std::string& needle : std::vector<std::string>{__VA_ARGS__}) { \
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)        \
            << "message \"" << e.what() << "\" lacks \"" << needle << "\"";     \
      }                                                                         \
    }                                                                           \
  } while (0)
