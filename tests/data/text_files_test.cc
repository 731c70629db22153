// data.source = "text" over a file, a folder or a glob: loading equals a naive reference that
// reads the files one by one in sorted order, parses paragraphs and splits each document by
// is_validation_doc under the file's path relative to the root; two files with the same base name
// keep two split sequences; a file has the same split name however it is named.
#include <gtest/gtest.h>

#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/data/text_corpus.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::TempDir;
using testing::write_bytes;

// The reference: files in the given (sorted) order, names given, split by the documented rule.
TextSplits naive_load(const std::vector<std::pair<std::string, std::string>>& path_and_name,
                      double val_fraction) {
  TextSplits out;
  for (const auto& [path, name] : path_and_name) {
    const std::vector<std::string> docs = parse_paragraphs(testing::read_bytes(path));
    for (size_t k = 0; k < docs.size(); ++k) {
      const bool val = is_validation_doc(name, static_cast<int64_t>(k), val_fraction);
      std::string& dst = val ? out.val : out.train;
      if (!dst.empty()) dst += kDocSeparator;
      dst += docs[k];
      ++(val ? out.val_docs : out.train_docs);
    }
  }
  return out;
}

class TextFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.file("corpus/x"));
    std::filesystem::create_directories(dir_.file("corpus/y"));
    std::filesystem::create_directories(dir_.file("corpus/.hidden"));
    // Same base name in two folders, same content: only the names can tell them apart.
    const std::string shared = testing::synthetic_text(6000, 3);
    write_bytes(dir_.file("corpus/x/a.txt"), shared);
    write_bytes(dir_.file("corpus/y/a.txt"), shared);
    write_bytes(dir_.file("corpus/b.txt"), testing::synthetic_text(5000, 4));
    write_bytes(dir_.file("corpus/.hidden/c.txt"), "skipped\n");
    write_bytes(dir_.file("corpus/.skip.txt"), "skipped\n");
  }
  std::string root() const { return dir_.file("corpus"); }
  TempDir dir_;
};

TEST_F(TextFiles, FolderEqualsTheFilesOneByOneInSortedOrder) {
  const double f = 0.2;
  const TextSplits got = load_text_files(root(), f);
  const TextSplits want = naive_load({{root() + "/b.txt", "b.txt"},
                                      {root() + "/x/a.txt", "x/a.txt"},
                                      {root() + "/y/a.txt", "y/a.txt"}},
                                     f);
  EXPECT_EQ(got.train, want.train);
  EXPECT_EQ(got.val, want.val);
  EXPECT_EQ(got.train_docs, want.train_docs);
  EXPECT_EQ(got.val_docs, want.val_docs);
  ASSERT_EQ(got.sources.size(), 3u);
  EXPECT_EQ(got.sources[0].path, root() + "/b.txt");
  EXPECT_EQ(got.sources[2].path, root() + "/y/a.txt");
  EXPECT_GT(got.val_docs, 0);
}

TEST_F(TextFiles, GlobEqualsTheMatchedFilesInSortedOrder) {
  const double f = 0.2;
  const TextSplits got = load_text_files(root() + "/*/a.txt", f);
  const TextSplits want =
      naive_load({{root() + "/x/a.txt", "x/a.txt"}, {root() + "/y/a.txt", "y/a.txt"}}, f);
  EXPECT_EQ(got.train, want.train);
  EXPECT_EQ(got.val, want.val);
}

// Two identical files called a.txt split differently (their names differ); with one name they
// would put the same documents in validation.
TEST_F(TextFiles, SameBaseNameInTwoFoldersKeepsTwoSplitSequences) {
  const double f = 0.3;
  const TextSplits x = load_text_files(root() + "/x", f);
  const TextSplits folder = load_text_files(root(), f);
  EXPECT_NE(split_name_of(root(), root() + "/x/a.txt"), split_name_of(root(), root() + "/y/a.txt"));
  const TextSplits xy =
      naive_load({{root() + "/x/a.txt", "x/a.txt"}, {root() + "/y/a.txt", "y/a.txt"}}, f);
  const TextSplits same_name =
      naive_load({{root() + "/x/a.txt", "a.txt"}, {root() + "/y/a.txt", "a.txt"}}, f);
  EXPECT_NE(xy.val, same_name.val) << "the test needs names to change the split";
  EXPECT_EQ(load_text_files(root() + "/*/a.txt", f).val, xy.val);
  EXPECT_GT(x.val_docs, 0);
  EXPECT_GT(folder.val_docs, x.val_docs);
}

// A file named directly, through its folder, or by a glob, is split under one name, so moving
// between these ways of naming the data does not move documents between train and validation.
TEST_F(TextFiles, AFileHasOneSplitNameHoweverItIsNamed) {
  const std::string file = root() + "/x/a.txt";
  EXPECT_EQ(split_name_of(file, file), "a.txt");
  EXPECT_EQ(split_name_of(root() + "/x", file), "a.txt");
  EXPECT_EQ(split_name_of(root() + "/x/", file), "a.txt");
  EXPECT_EQ(split_name_of(root() + "/x/*.txt", file), "a.txt");
  EXPECT_EQ(split_name_of(root() + "/*/a.txt", file), "x/a.txt");
  EXPECT_EQ(split_name_of(root(), file), "x/a.txt");
  // Relative names: a glob whose first folder has a wildcard, a file in the working folder.
  EXPECT_EQ(split_name_of("*/a.txt", "x/a.txt"), "x/a.txt");
  EXPECT_EQ(split_name_of("*.txt", "a.txt"), "a.txt");
  EXPECT_EQ(split_name_of("a.txt", "a.txt"), "a.txt");
  EXPECT_EQ(split_name_of("./*/*.txt", "./x/a.txt"), "x/a.txt");
  const TextSplits one = load_text_files(file, 0.25);
  EXPECT_EQ(one.val, load_text_file(file, 0.25).val);
  EXPECT_EQ(one.val, load_text_files(root() + "/x", 0.25).val);
  EXPECT_EQ(one.val, load_text_files(root() + "/x/*.txt", 0.25).val);
}

TEST_F(TextFiles, MissingInputsNameThePath) {
  testing::expect_throw_mentioning<IoError>([&] { load_text_files(root() + "/nope"); },
                                            root() + "/nope");
  testing::expect_throw_mentioning<IoError>([&] { load_text_files(root() + "/*.md"); },
                                            root() + "/*.md");
  testing::expect_throw_mentioning<ConfigError>([&] { load_text_files(root(), 1.0); },
                                                "data.val_fraction");
}

}  // namespace
}  // namespace brigade
