// IDX writer (data/idx_writer.h): what it writes, the reader reads back unchanged; the files
// are gzip and byte-identical for the same content; the CRC-32C it reports is the file's.
#include "brigade/data/idx_writer.h"

#include <gtest/gtest.h>

#include "brigade/base/crc32c.h"
#include "brigade/data/idx_reader.h"
#include "data_test_util.h"

namespace brigade {
namespace {

IdxImages some_images(int64_t count, int64_t rows, int64_t cols) {
  IdxImages im;
  im.count = count;
  im.rows = rows;
  im.cols = cols;
  for (int64_t i = 0; i < count * rows * cols; ++i) {
    im.pixels.push_back(static_cast<uint8_t>((i * 131 + i / 7) % 256));
  }
  return im;
}

TEST(IdxWriter, WhatItWritesReadsBackUnchanged) {
  testing::TempDir dir;
  for (int64_t count : {0, 1, 37, 1000}) {
    SCOPED_TRACE("count " + std::to_string(count));
    const IdxImages im = some_images(count, 28, 28);
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < count; ++i) labels.push_back(static_cast<int32_t>((i * 3) % 256));
    const std::string img = dir.file("images.gz"), lab = dir.file("labels.gz");
    const WrittenFile wi = write_idx_images(img, im);
    const WrittenFile wl = write_idx_labels(lab, labels);

    const IdxImages back = read_idx_images(img);
    EXPECT_EQ(back.count, count);
    EXPECT_EQ(back.rows, 28);
    EXPECT_EQ(back.cols, 28);
    EXPECT_EQ(back.pixels, im.pixels);
    EXPECT_EQ(read_idx_labels(lab), labels);

    const std::string bytes = testing::read_bytes(img);
    EXPECT_EQ(wi.bytes, static_cast<int64_t>(bytes.size()));
    EXPECT_EQ(wi.crc32c, crc32c(bytes));
    EXPECT_EQ(wl.crc32c, crc32c(testing::read_bytes(lab)));
    // gzip magic: the reader would also accept raw IDX, so check it really is compressed.
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  }
}

TEST(IdxWriter, OddImageShapesRoundTrip) {
  testing::TempDir dir;
  const IdxImages im = some_images(5, 3, 17);
  write_idx_images(dir.file("odd.gz"), im);
  const IdxImages back = read_idx_images(dir.file("odd.gz"));
  EXPECT_EQ(back.rows, 3);
  EXPECT_EQ(back.cols, 17);
  EXPECT_EQ(back.pixels, im.pixels);
}

TEST(IdxWriter, SameContentGivesTheSameBytes) {
  testing::TempDir dir;
  const IdxImages im = some_images(50, 28, 28);
  const WrittenFile a = write_idx_images(dir.file("a.gz"), im);
  const WrittenFile b = write_idx_images(dir.file("b.gz"), im);
  EXPECT_EQ(testing::read_bytes(dir.file("a.gz")), testing::read_bytes(dir.file("b.gz")));
  EXPECT_EQ(a.crc32c, b.crc32c);
}

TEST(IdxWriter, EncodesTheHeaderBigEndian) {
  const std::string raw = encode_idx_labels(std::vector<int32_t>{7, 255});
  EXPECT_EQ(raw, std::string("\x00\x00\x08\x01\x00\x00\x00\x02\x07\xff", 10));
}

// Noise-like pixels do not compress: the output needs all of deflateBound's room.
TEST(IdxWriter, IncompressibleImagesRoundTrip) {
  testing::TempDir dir;
  IdxImages im;
  im.count = 3;
  im.rows = 1024;
  im.cols = 1024;
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < im.count * im.rows * im.cols; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    im.pixels.push_back(static_cast<uint8_t>(x));
  }
  write_idx_images(dir.file("noise.gz"), im);
  EXPECT_EQ(read_idx_images(dir.file("noise.gz")).pixels, im.pixels);
}

}  // namespace
}  // namespace brigade
