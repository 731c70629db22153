// expand_input_files against a naive listing: a file, a folder (recursive, dot names skipped),
// a glob, and the errors.
#include "brigade/data/input_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "brigade/base/error.h"
#include "data/data_test_util.h"

namespace brigade {
namespace {

using testing::TempDir;
using testing::write_bytes;

TEST(InputFilesTest, FileFolderAndGlob) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("a/sub"));
  std::filesystem::create_directories(dir.file("a/.hidden"));
  write_bytes(dir.file("a/z.txt"), "z");
  write_bytes(dir.file("a/b.txt"), "b");
  write_bytes(dir.file("a/sub/c.md"), "c");
  write_bytes(dir.file("a/.dot.txt"), "dot");
  write_bytes(dir.file("a/.hidden/d.txt"), "d");

  EXPECT_EQ(expand_input_files(dir.file("a/z.txt")), std::vector<std::string>{dir.file("a/z.txt")});
  EXPECT_EQ(
      expand_input_files(dir.file("a")),
      (std::vector<std::string>{dir.file("a/b.txt"), dir.file("a/sub/c.md"), dir.file("a/z.txt")}));
  EXPECT_EQ(expand_input_files(dir.file("a/*.txt")),
            (std::vector<std::string>{dir.file("a/b.txt"), dir.file("a/z.txt")}));
  EXPECT_EQ(expand_input_files(dir.file("a/*/*.md")),
            std::vector<std::string>{dir.file("a/sub/c.md")});
}

TEST(InputFilesTest, ErrorsNameThePath) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));
  std::filesystem::create_directories(dir.file("d/x"));
  auto message = [](const std::string& spec) {
    try {
      expand_input_files(spec);
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(dir.file("missing")).find("no such file"), std::string::npos);
  EXPECT_NE(message(dir.file("empty")).find("holds no files"), std::string::npos);
  EXPECT_NE(message(dir.file("*.nothing")).find("no file matches"), std::string::npos);
  EXPECT_NE(message(dir.file("nofolder/*.txt")).find("no file matches"), std::string::npos);
  EXPECT_NE(message(dir.file("d/*")).find("not a regular file"), std::string::npos);
  EXPECT_NE(message("").find("empty path"), std::string::npos);
}

}  // namespace
}  // namespace brigade
