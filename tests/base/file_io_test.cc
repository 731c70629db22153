#include "brigade/base/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "brigade/base/error.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using detail::IoFault;
using detail::IoOp;
using testing::TempDir;

// Bitwise CRC-32 (reflected, polynomial 0xEDB88320), straight from the definition: an
// independent reference for the zlib-backed implementation.
uint32_t naive_crc32(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

TEST(Crc32, MatchesCheckValueAndBitwiseReference) {
  EXPECT_EQ(crc32_of(std::string_view("123456789")), 0xCBF43926u);  // the catalogued check value
  EXPECT_EQ(crc32_of(std::string_view("")), 0u);
  const std::string data = pattern(10007);
  EXPECT_EQ(crc32_of(data), naive_crc32(data));
}

TEST(Crc32, StreamingEqualsOneShot) {
  const std::string data = pattern(5000);
  uint32_t crc = 0;
  for (size_t at = 0; at < data.size(); at += 333) {
    const size_t n = std::min<size_t>(333, data.size() - at);
    crc = crc32_update(crc, data.data() + at, n);
  }
  EXPECT_EQ(crc, crc32_of(data));
}

TEST(FileIo, DurableWriteRoundTripAndDigest) {
  TempDir dir;
  const std::string path = dir / "a.bin";
  const std::string data = pattern(3 << 20);  // spans several 1 MiB digest chunks
  const FileDigest written = write_file_durable(path, data);
  EXPECT_EQ(written.bytes, static_cast<int64_t>(data.size()));
  EXPECT_EQ(written.crc32, naive_crc32(data));
  EXPECT_EQ(read_file(path), data);
  EXPECT_EQ(digest_file(path), written);
}

TEST(FileIo, StreamingWriterDigestsWhatItWrote) {
  TempDir dir;
  DurableFileWriter w(dir / "b.bin");
  w.append(std::string_view("hello "));
  w.append(std::string_view("world"));
  const FileDigest d = w.close();
  EXPECT_EQ(d.bytes, 11);
  EXPECT_EQ(d.crc32, naive_crc32("hello world"));
  EXPECT_EQ(testing::read_raw(dir / "b.bin"), "hello world");
}

TEST(FileIo, ErrorsNameThePathAndReason) {
  TempDir dir;
  const std::string missing = dir / "nope/x.bin";
  EXPECT_THROW_WITH(read_file(dir / "missing"), IoError, dir / "missing", "No such file");
  EXPECT_THROW_WITH(write_file_durable(missing, "x"), IoError, missing, "No such file");
  EXPECT_THROW_WITH(digest_file(dir / "missing"), IoError, dir / "missing");
  // A link to a device would be read forever: refused before any byte is read.
  std::filesystem::create_symlink("/dev/zero", dir / "zero.bin");
  EXPECT_THROW_WITH(digest_file(dir / "zero.bin"), IoError, dir / "zero.bin", "not a regular file");
  EXPECT_THROW_WITH(fsync_dir(dir / "missing"), IoError, dir / "missing");
  EXPECT_THROW_WITH(rename_atomic(dir / "missing", dir / "other"), IoError, dir / "missing",
                    dir / "other");
  testing::write_raw(dir / "big", pattern(100));
  EXPECT_THROW_WITH(read_file(dir / "big", 99), IoError, dir / "big", "too large");
}

TEST(FileIo, RenameReplacesAtomically) {
  TempDir dir;
  write_file_durable(dir / "new", "new");
  write_file_durable(dir / "old", "old");
  rename_atomic(dir / "new", dir / "old");
  fsync_dir(dir.path());
  EXPECT_EQ(read_file(dir / "old"), "new");
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));
}

TEST(FileIo, MakeAndRemoveDirs) {
  TempDir dir;
  make_dirs(dir / "a/b/c");
  make_dirs(dir / "a/b/c");  // existing is fine
  write_file_durable(dir / "a/b/c/f", "x");
  remove_all(dir / "a");
  EXPECT_FALSE(std::filesystem::exists(dir / "a"));
  remove_all(dir / "a");  // missing is fine
}

TEST(IoFault, NthWriteFailsWithEnospcAndTearsTheWrite) {
  TempDir dir;
  const std::string path = dir / "f";
  {
    detail::ScopedIoFault fault(IoFault{.op = IoOp::kWrite, .nth = 2, .error = ENOSPC});
    DurableFileWriter w(path);
    w.append(std::string_view("aaaa"));  // 1st write: fine
    EXPECT_THROW_WITH(w.append(std::string_view("bbbbbb")), IoError, path, std::strerror(ENOSPC));
    EXPECT_THROW(w.append(std::string_view("c")), IoError);  // the disk stays full
    EXPECT_EQ(detail::io_op_count(IoOp::kWrite), 3);
  }
  EXPECT_EQ(testing::read_raw(path), "aaaabbb");    // half of the failing write landed
  EXPECT_EQ(detail::io_op_count(IoOp::kWrite), 0);  // the scope reset the counters
  write_file_durable(path, "ok");                   // and removed the fault
  EXPECT_EQ(read_file(path), "ok");
}

TEST(IoFault, OnceFailsOnlyTheNthCall) {
  TempDir dir;
  detail::ScopedIoFault fault(
      IoFault{.op = IoOp::kWrite, .nth = 1, .error = EIO, .torn = false, .once = true});
  EXPECT_THROW_WITH(write_file_durable(dir / "f", "x"), IoError, std::strerror(EIO));
  EXPECT_EQ(testing::read_raw(dir / "f"), "");
  write_file_durable(dir / "f", "y");
  EXPECT_EQ(read_file(dir / "f"), "y");
}

TEST(IoFault, FsyncAndRenameFaults) {
  TempDir dir;
  {
    detail::ScopedIoFault fault(IoFault{.op = IoOp::kFsync, .nth = 1, .error = EIO});
    EXPECT_THROW_WITH(write_file_durable(dir / "f", "x"), IoError, "fsync", dir / "f");
    EXPECT_THROW_WITH(fsync_dir(dir.path()), IoError, "fsync", dir.path());
  }
  {
    detail::ScopedIoFault fault(IoFault{.op = IoOp::kRename, .nth = 1, .error = ENOSPC});
    write_file_durable(dir / "g", "x");
    EXPECT_THROW_WITH(rename_atomic(dir / "g", dir / "h"), IoError, dir / "g");
    EXPECT_TRUE(std::filesystem::exists(dir / "g"));
    EXPECT_FALSE(std::filesystem::exists(dir / "h"));
  }
}

}  // namespace
}  // namespace brigade
