#pragma once
// IDX files (the MNIST / Fashion-MNIST format), read through zlib so both .gz and raw files
// work. Header, all big-endian: uint32 magic (0x00000803 images: uint8, 3 dims; 0x00000801
// labels: uint8, 1 dim), then one uint32 per dimension, then the uint8 payload.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // (count, rows, cols)
};

// Reads an image file. IoError naming the path if it is missing, not gzip/IDX, has the wrong
// magic or implausible dims (each of rows, cols in [1, 4096]), is truncated, or has bytes left
// after the payload.
IdxImages read_idx_images(const std::string& path);

// Reads a label file, validated as above. Labels are returned as int32.
std::vector<int32_t> read_idx_labels(const std::string& path);

// How uint8 pixels become model inputs.
enum class PixelNorm {
  kUnit,        // x / 255, in [0, 1]
  kStandardize  // (x / 255 - kFashionMnistMean) / kFashionMnistStd: zero mean, unit variance
};
inline constexpr float kFashionMnistMean = 0.2860f;  // mean of the training pixels / 255
inline constexpr float kFashionMnistStd = 0.3530f;   // their standard deviation

void normalize_pixels(const uint8_t* in, float* out, int64_t n, PixelNorm norm);

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// A classification set ready for ImageDataset.
struct ImageSet {
  int64_t count = 0;
  int64_t dim = 0;              // features per example (rows * cols)
  int32_t num_classes = 0;      // labels are in [0, num_classes)
  std::vector<float> features;  // (count, dim)
  std::vector<int32_t> labels;  // (count)
};

// Loads Fashion-MNIST split "train" or "t10k" from dir ({split}-images-idx3-ubyte.gz and
// {split}-labels-idx1-ubyte.gz). IoError naming the path if a file is bad, the images are not
// 28x28, the counts differ, or a label is not in [0, 10); ConfigError for an unknown split.
ImageSet load_fashion_mnist(const std::string& dir, std::string_view split,
                            PixelNorm norm = PixelNorm::kStandardize);

}  // namespace brigade
