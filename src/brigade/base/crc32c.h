#pragma once
// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum of TFRecord framing
// (TensorBoard event files). Written here because no Debian package of this release ships one
// (Google's crc32c and Abseil's absl::crc32c are newer than Debian 12's packages); the table
// form is the textbook one, checked against RFC 3720's test vectors.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace brigade {

uint32_t crc32c(const void* data, size_t n);
inline uint32_t crc32c(std::string_view bytes) {
  return crc32c(bytes.data(), bytes.size());
}

}  // namespace brigade
