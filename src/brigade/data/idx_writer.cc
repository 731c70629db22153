#include "brigade/data/idx_writer.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "brigade/base/check.h"
#include "brigade/base/crc32c.h"
#include "brigade/base/file_io.h"

namespace brigade {

namespace {

void append_be32(std::string& out, int64_t value) {
  BRIGADE_CHECK(value >= 0 && value <= std::numeric_limits<uint32_t>::max())
      << "IDX header field " << value << " does not fit 32 bits";
  const auto v = static_cast<uint32_t>(value);
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

WrittenFile write_durable(const std::string& path, const std::string& bytes) {
  write_file_durable(path, bytes);
  return {static_cast<int64_t>(bytes.size()), crc32c(bytes)};
}

}  // namespace

std::string encode_idx_images(const IdxImages& images) {
  BRIGADE_CHECK(static_cast<int64_t>(images.pixels.size()) ==
                images.count * images.rows * images.cols)
      << images.pixels.size() << " pixels for " << images.count << " images of " << images.rows
      << "x" << images.cols;
  std::string out;
  out.reserve(16 + images.pixels.size());
  append_be32(out, kIdxImagesMagic);
  append_be32(out, images.count);
  append_be32(out, images.rows);
  append_be32(out, images.cols);
  out.append(reinterpret_cast<const char*>(images.pixels.data()), images.pixels.size());
  return out;
}

std::string encode_idx_labels(std::span<const int32_t> labels) {
  std::string out;
  out.reserve(8 + labels.size());
  append_be32(out, kIdxLabelsMagic);
  append_be32(out, static_cast<int64_t>(labels.size()));
  for (size_t i = 0; i < labels.size(); ++i) {
    BRIGADE_CHECK(labels[i] >= 0 && labels[i] <= 255)
        << "label " << labels[i] << " at " << i << " does not fit IDX's uint8";
    out.push_back(static_cast<char>(labels[i]));
  }
  return out;
}

std::string gzip_compress(std::string_view bytes, int level) {
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper with a default header (no name, mtime 0).
  BRIGADE_CHECK(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK)
      << "deflateInit2 at level " << level;
  // zlib counts in 32-bit uInt: feed and drain in chunks below that.
  constexpr size_t kChunk = size_t{1} << 30;
  std::string out;
  size_t fed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      const size_t take = std::min(kChunk, bytes.size() - fed);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      z.avail_in = static_cast<uInt>(take);
      fed += take;
    }
    const size_t used = out.size();
    const size_t room = std::min<size_t>(kChunk, deflateBound(&z, z.avail_in) + 64);
    out.resize(used + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    z.avail_out = static_cast<uInt>(room);
    rc = deflate(&z, fed == bytes.size() ? Z_FINISH : Z_NO_FLUSH);
    BRIGADE_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR) << "deflate: " << rc;
    out.resize(used + room - z.avail_out);
  }
  deflateEnd(&z);
  return out;
}

WrittenFile write_idx_images(const std::string& path, const IdxImages& images) {
  return write_durable(path, gzip_compress(encode_idx_images(images)));
}

WrittenFile write_idx_labels(const std::string& path, std::span<const int32_t> labels) {
  return write_durable(path, gzip_compress(encode_idx_labels(labels)));
}

}  // namespace brigade
