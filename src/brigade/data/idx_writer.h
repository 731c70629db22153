#pragma once
// Writes IDX files (the format of data/idx_reader.h), gzip-compressed, so that
// read_idx_images / read_idx_labels and load_fashion_mnist read them back as they are.
// Used by `brigade partition` to write one client's share of an image data set.
//
// The gzip stream carries no name and no time stamp (mtime 0), so the same content gives the
// same bytes (and CRC-32C) on every run with the same zlib.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "brigade/data/idx_reader.h"

namespace brigade {

// What was written: the file's size and the CRC-32C of its bytes (the compressed ones).
struct WrittenFile {
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};

// The raw IDX bytes (header + payload) of images.pixels as (count, rows, cols) uint8.
std::string encode_idx_images(const IdxImages& images);

// The raw IDX bytes of labels, each in [0, 255] (checked).
std::string encode_idx_labels(std::span<const int32_t> labels);

// gzip (RFC 1952) of bytes at zlib's level (0-9, or Z_DEFAULT_COMPRESSION = -1).
std::string gzip_compress(std::string_view bytes, int level = -1);

// Writes the gzip of encode_idx_*() to path and fsyncs it (the caller fsyncs the folder).
// IoError naming the path if it cannot be written.
WrittenFile write_idx_images(const std::string& path, const IdxImages& images);
WrittenFile write_idx_labels(const std::string& path, std::span<const int32_t> labels);

}  // namespace brigade
