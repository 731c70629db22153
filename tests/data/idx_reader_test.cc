// IDX reader: tiny gzip files written here with zlib, each corruption rejected with an IoError
// naming the file, the pixel normalisation in closed form, and the real Fashion-MNIST test set.
#include "brigade/data/idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>

#include "brigade/base/error.h"
#include "data_test_util.h"

namespace brigade {
namespace {

using testing::expect_throw_mentioning;

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string images_bytes(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::string b = be32(magic) + be32(n) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i)
    b.push_back(static_cast<char>((i * 37 + 11) % 256));
  return b;
}

std::string labels_bytes(uint32_t n, uint32_t magic = 0x801) {
  std::string b = be32(magic) + be32(n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(static_cast<char>(i % 10));
  return b;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(IdxReader, ReadsTinyGzipImagesAndLabels) {
  testing::TempDir dir;
  const std::string img = dir.file("imgs.gz"), lab = dir.file("labels.gz");
  write_gz(img, images_bytes(3, 2, 4));
  write_gz(lab, labels_bytes(3));
  const IdxImages im = read_idx_images(img);
  EXPECT_EQ(im.count, 3);
  EXPECT_EQ(im.rows, 2);
  EXPECT_EQ(im.cols, 4);
  ASSERT_EQ(im.pixels.size(), 24u);
  for (uint32_t i = 0; i < 24; ++i) EXPECT_EQ(im.pixels[i], (i * 37 + 11) % 256) << i;
  EXPECT_EQ(read_idx_labels(lab), (std::vector<int32_t>{0, 1, 2}));
  // Uncompressed IDX files are read as well (zlib passes them through).
  const std::string raw = dir.file("imgs.raw");
  testing::write_bytes(raw, images_bytes(3, 2, 4));
  EXPECT_EQ(read_idx_images(raw).pixels, im.pixels);
}

TEST(IdxReader, CorruptFilesThrowIoErrorNamingThePath) {
  testing::TempDir dir;
  auto expect_bad_images = [&](const char* name, const std::string& path) {
    SCOPED_TRACE(name);
    expect_throw_mentioning<IoError>([&] { read_idx_images(path); }, path);
  };
  const std::string wrong_magic = dir.file("wrong-magic.gz");
  write_gz(wrong_magic, images_bytes(3, 2, 4, 0x801));
  expect_bad_images("wrong magic", wrong_magic);
  const std::string wrong_dtype = dir.file("wrong-dtype.gz");
  write_gz(wrong_dtype, images_bytes(3, 2, 4, 0x0d03));  // float payload: not ours
  expect_bad_images("wrong dtype", wrong_dtype);
  const std::string zero_rows = dir.file("zero-rows.gz");
  write_gz(zero_rows, images_bytes(3, 0, 4));
  expect_bad_images("zero rows", zero_rows);
  const std::string huge = dir.file("huge-dims.gz");
  write_gz(huge, be32(0x803) + be32(3) + be32(100000) + be32(4));
  expect_bad_images("huge dims", huge);

  std::string full = images_bytes(5, 3, 3);
  const std::string short_payload = dir.file("short-payload.gz");
  write_gz(short_payload, full.substr(0, full.size() - 9));  // one image missing
  expect_bad_images("payload shorter than the header says", short_payload);
  const std::string header_only = dir.file("short-header.gz");
  write_gz(header_only, full.substr(0, 10));
  expect_bad_images("short header", header_only);
  const std::string trailing = dir.file("trailing.gz");
  write_gz(trailing, full + "xyz");
  expect_bad_images("bytes after the payload", trailing);
  const std::string count_lies = dir.file("count-lies.gz");
  write_gz(count_lies, be32(0x803) + be32(0xffffffffu) + be32(28) + be32(28) + "abc");
  expect_bad_images("enormous count", count_lies);

  // A gzip stream cut short: the compressed file loses its tail.
  const std::string good = dir.file("good.gz");
  write_gz(good, images_bytes(50, 8, 8));
  const std::string compressed = testing::read_bytes(good);
  const std::string cut = dir.file("cut.gz");
  testing::write_bytes(cut, compressed.substr(0, compressed.size() / 2));
  expect_bad_images("truncated gzip", cut);
  const std::string no_trailer = dir.file("no-trailer.gz");
  testing::write_bytes(no_trailer, compressed.substr(0, compressed.size() - 4));
  expect_bad_images("gzip without its size trailer", no_trailer);
  std::string flipped = compressed;
  flipped[flipped.size() - 6] ^= 0x55;  // corrupt the CRC
  const std::string bad_crc = dir.file("bad-crc.gz");
  testing::write_bytes(bad_crc, flipped);
  expect_bad_images("bad crc", bad_crc);

  const std::string labels_magic = dir.file("labels-magic.gz");
  write_gz(labels_magic, labels_bytes(4, 0x803));
  expect_throw_mentioning<IoError>([&] { read_idx_labels(labels_magic); }, labels_magic);
  const std::string labels_short = dir.file("labels-short.gz");
  write_gz(labels_short, labels_bytes(4).substr(0, 10));
  expect_throw_mentioning<IoError>([&] { read_idx_labels(labels_short); }, labels_short);

  const std::string missing = dir.file("missing.gz");
  expect_bad_images("missing", missing);
  expect_throw_mentioning<IoError>([&] { load_fashion_mnist(dir.path(), "t10k"); },
                                   dir.file("t10k-images-idx3-ubyte.gz"));
  EXPECT_THROW(load_fashion_mnist(dir.path(), "test"), ConfigError);
}

TEST(IdxReader, LoadFashionMnistChecksShapeCountsAndLabels) {
  testing::TempDir dir;
  const std::string img = dir.file("t10k-images-idx3-ubyte.gz");
  const std::string lab = dir.file("t10k-labels-idx1-ubyte.gz");
  write_gz(img, images_bytes(12, 28, 28));
  write_gz(lab, labels_bytes(12));
  const ImageSet set = load_fashion_mnist(dir.path(), "t10k", PixelNorm::kUnit);
  EXPECT_EQ(set.count, 12);
  EXPECT_EQ(set.dim, 784);
  EXPECT_EQ(set.num_classes, 10);
  ASSERT_EQ(set.features.size(), 12u * 784u);
  EXPECT_FLOAT_EQ(set.features[5], static_cast<float>((5 * 37 + 11) % 256) / 255.0f);
  EXPECT_EQ(set.labels[11], 1);

  write_gz(lab, labels_bytes(11));
  expect_throw_mentioning<IoError>([&] { load_fashion_mnist(dir.path(), "t10k"); }, lab);
  std::string bad_label = labels_bytes(12);
  bad_label.back() = 10;
  write_gz(lab, bad_label);
  expect_throw_mentioning<IoError>([&] { load_fashion_mnist(dir.path(), "t10k"); }, lab);
  write_gz(lab, labels_bytes(12));
  write_gz(img, images_bytes(12, 27, 28));
  expect_throw_mentioning<IoError>([&] { load_fashion_mnist(dir.path(), "t10k"); }, img);
}

TEST(IdxReader, NormalizePixels) {
  const uint8_t in[3] = {0, 128, 255};
  float out[3];
  normalize_pixels(in, out, 3, PixelNorm::kUnit);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 128.0f / 255.0f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  normalize_pixels(in, out, 3, PixelNorm::kStandardize);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(out[i], (in[i] / 255.0 - 0.2860) / 0.3530, 1e-5) << i;
  }
}

TEST(IdxReader, RealFashionMnistTestSet) {
  const std::string dir = kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << dir << " missing";
  }
  const IdxImages im = read_idx_images(dir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(im.count, 10000);
  EXPECT_EQ(im.rows, 28);
  EXPECT_EQ(im.cols, 28);
  const ImageSet set = load_fashion_mnist(dir, "t10k");
  ASSERT_EQ(set.count, 10000);
  // The published test set is balanced: 1000 images of each of the 10 classes.
  std::vector<int> per_class(10, 0);
  for (int32_t l : set.labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << c;
  // Standardised with the training statistics, the test pixels are close to mean 0, std 1.
  double sum = 0, sum2 = 0;
  for (float x : set.features) sum += x, sum2 += static_cast<double>(x) * x;
  const double n = static_cast<double>(set.features.size());
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sum2 / n - mean * mean), 1.0, 0.02);
}

}  // namespace
}  // namespace brigade
