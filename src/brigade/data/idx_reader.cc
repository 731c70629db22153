#include "brigade/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "brigade/base/error.h"

namespace brigade {

namespace {

constexpr int64_t kMaxDim = 4096;
constexpr int64_t kMaxPayloadBytes = int64_t{1} << 34;

// A gzip (or plain) file read sequentially; every failure names the path.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw IoError(path + ": no such file");
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) throw IoError(path + ": cannot open");
  }
  ~GzReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads exactly n bytes into dst or throws.
  void read(unsigned char* dst, int64_t n, const char* what) {
    int64_t done = 0;
    while (done < n) done += read_some(dst + done, n - done, done, n, what);
  }

  // Reads exactly n bytes into out, growing it as data arrives: a corrupt header claiming a
  // huge count fails as truncated instead of allocating that much up front.
  void read(std::vector<uint8_t>& out, int64_t n, const char* what) {
    out.clear();
    int64_t done = 0;
    while (done < n) {
      const int64_t want = std::min<int64_t>(n - done, kChunk);
      out.resize(static_cast<size_t>(done + want));
      done += read_some(out.data() + done, want, done, n, what);
    }
    out.resize(static_cast<size_t>(done));
  }

  // The stream must end here, cleanly (a truncated gzip member reports an error at its end).
  void expect_end() {
    unsigned char extra;
    const int got = gzread(file_, &extra, 1);
    if (got < 0) throw IoError(path_ + ": read error at the end: " + error_text());
    if (got > 0) throw IoError(path_ + ": unexpected bytes after the payload");
    const int rc = gzclose(file_);
    file_ = nullptr;
    if (rc != Z_OK) throw IoError(path_ + ": gzip stream is incomplete or corrupt");
  }

 private:
  static constexpr int64_t kChunk = int64_t{1} << 24;

  int64_t read_some(unsigned char* dst, int64_t max, int64_t done, int64_t n, const char* what) {
    const int got = gzread(file_, dst, static_cast<unsigned>(std::min(max, kChunk)));
    if (got < 0) throw IoError(path_ + ": read error in " + what + ": " + error_text());
    if (got == 0) {
      throw IoError(path_ + ": truncated: " + what + " ends after " + std::to_string(done) +
                    " of " + std::to_string(n) + " bytes");
    }
    return got;
  }

  std::string error_text() {
    int errnum = 0;
    const char* msg = gzerror(file_, &errnum);
    return msg != nullptr ? msg : "unknown";
  }

  std::string path_;
  gzFile file_ = nullptr;
};

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void check_magic(const std::string& path, uint32_t got, uint32_t want) {
  if (got != want) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), ": bad IDX magic 0x%08x (expected 0x%08x)", got, want);
    throw IoError(path + buf);
  }
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  GzReader in(path);
  unsigned char h[16];
  in.read(h, sizeof(h), "header");
  check_magic(path, be32(h), kIdxImagesMagic);
  IdxImages out;
  out.count = be32(h + 4);
  out.rows = be32(h + 8);
  out.cols = be32(h + 12);
  if (out.rows < 1 || out.rows > kMaxDim || out.cols < 1 || out.cols > kMaxDim) {
    throw IoError(path + ": implausible image size " + std::to_string(out.rows) + "x" +
                  std::to_string(out.cols));
  }
  const int64_t bytes = out.count * out.rows * out.cols;  // < 2^32 * 2^24: no overflow
  if (bytes > kMaxPayloadBytes) {
    throw IoError(path + ": " + std::to_string(out.count) + " images is implausibly many");
  }
  in.read(out.pixels, bytes, "pixels");
  in.expect_end();
  return out;
}

std::vector<int32_t> read_idx_labels(const std::string& path) {
  GzReader in(path);
  unsigned char h[8];
  in.read(h, sizeof(h), "header");
  check_magic(path, be32(h), kIdxLabelsMagic);
  const int64_t count = be32(h + 4);
  std::vector<uint8_t> raw;
  in.read(raw, count, "labels");
  in.expect_end();
  return std::vector<int32_t>(raw.begin(), raw.end());
}

void normalize_pixels(const uint8_t* in, float* out, int64_t n, PixelNorm norm) {
  const bool standardize = norm == PixelNorm::kStandardize;
  const float scale = standardize ? 1.0f / (255.0f * kFashionMnistStd) : 1.0f / 255.0f;
  const float shift = standardize ? kFashionMnistMean / kFashionMnistStd : 0.0f;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) * scale - shift;
}

ImageSet load_fashion_mnist(const std::string& dir, std::string_view split, PixelNorm norm) {
  if (split != "train" && split != "t10k") {
    throw ConfigError("Fashion-MNIST split '" + std::string(split) +
                      "': must be 'train' or 't10k'");
  }
  const std::string images_path = dir + "/" + std::string(split) + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + std::string(split) + "-labels-idx1-ubyte.gz";
  IdxImages images = read_idx_images(images_path);
  std::vector<int32_t> labels = read_idx_labels(labels_path);
  if (images.count == 0) throw IoError(images_path + ": holds no images (the header says 0)");
  if (images.rows != 28 || images.cols != 28) {
    throw IoError(images_path + ": images are " + std::to_string(images.rows) + "x" +
                  std::to_string(images.cols) + ", Fashion-MNIST's are 28x28");
  }
  if (static_cast<int64_t>(labels.size()) != images.count) {
    throw IoError(labels_path + ": " + std::to_string(labels.size()) + " labels for " +
                  std::to_string(images.count) + " images in " + images_path);
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 10) {
      throw IoError(labels_path + ": label " + std::to_string(labels[i]) + " at index " +
                    std::to_string(i) + " is not in [0, 10)");
    }
  }
  ImageSet out;
  out.count = images.count;
  out.dim = images.rows * images.cols;
  out.num_classes = 10;
  out.features.resize(images.pixels.size());
  normalize_pixels(images.pixels.data(), out.features.data(), out.count * out.dim, norm);
  out.labels = std::move(labels);
  return out;
}

}  // namespace brigade
