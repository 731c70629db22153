#pragma once
// Wire encodings of compressed updates, with exact byte counts and decoders that check every
// count, length and index before use (a payload comes from the network: never trusted).
//
// All multi-byte fields are little-endian. Value formats:
//   kF32  4 bytes per value;
//   kBF16 2 bytes per value (round to nearest even; tensor/bf16.h);
//   kSign 1 bit per value, 8 per byte, LSB first across the whole payload, 1 = negative;
//         decoded as +1 / -1 (zero and NaN encode as +1).
//
// Sparse chunk payload (DeMo/DisTrO): G groups (one per tensor); group g has num_chunks chunks
// of chunk_size coefficients and carries exactly k of them per chunk.
//   [0, 4)   magic "BLSP"         [4] version 1      [5] value format
//   [6, 8)   zero                  [8, 12) G (u32)
//   G x 12   (chunk_size, num_chunks, k) as u32
//   indices  per group, per chunk, k indices ascending, u8 if chunk_size <= 256 else u16
//   values   all K = sum num_chunks * k values, in the order of the indices
// size = 12 + 12 G + sum_g num_chunks_g * k_g * index_bytes(chunk_size_g) + value_bytes(K).
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/base/error.h"

namespace brigade {

// A payload that is malformed or does not match what this replica expects.
class PayloadError : public CommError {
 public:
  explicit PayloadError(const std::string& what)
      : CommError(Kind::kOther, "corrupt payload: " + what) {}
};

enum class ValueFormat : uint8_t { kF32 = 0, kBF16 = 1, kSign = 2 };

// "f32", "bf16", "1bit".
const char* value_format_name(ValueFormat f);
// Inverse of value_format_name; throws ConfigError naming `key` and the allowed names.
ValueFormat parse_value_format(const std::string& name, const std::string& key);

// Bytes of n values: 4n, 2n, or ceil(n / 8).
int64_t value_bytes(ValueFormat f, int64_t n);
// Bytes of one index into a chunk of chunk_size (1..65536) coefficients: 1 if <= 256, else 2.
int index_bytes(int64_t chunk_size);

// Writes value e of a value section that starts at `values` (kSign bits must start zeroed).
void put_value(uint8_t* values, ValueFormat f, int64_t e, float v);
// Reads value e as sent: f32 as is, bf16 widened, a sign bit as +1 / -1.
float get_value(const uint8_t* values, ValueFormat f, int64_t e);
// The value a receiver decodes for v: v, bf16(v), or +1 / -1.
float round_trip_value(ValueFormat f, float v);

struct SparseGroupShape {
  uint32_t chunk_size = 1;  // coefficients per chunk, 1..65536
  uint32_t num_chunks = 0;
  uint32_t k = 0;  // entries sent per chunk, <= chunk_size
  bool operator==(const SparseGroupShape&) const = default;
};

class SparsePayloadFormat {
 public:
  SparsePayloadFormat() = default;
  // Programmer-chosen shapes: checked with BRIGADE_CHECK.
  SparsePayloadFormat(std::vector<SparseGroupShape> groups, ValueFormat values);

  // Parses the header of a payload of unknown shape and checks that its length is exactly what
  // the header implies. Throws PayloadError naming the bad field. Does not check indices.
  static SparsePayloadFormat from_header(const uint8_t* data, int64_t size);

  const std::vector<SparseGroupShape>& groups() const { return groups_; }
  ValueFormat values() const { return values_; }
  int64_t size_bytes() const { return size_; }
  int64_t total_entries() const { return total_entries_; }

  // Writes the header into out (size_bytes() bytes) and zeroes the sign bits.
  void begin(uint8_t* out) const;
  // Stores chunk c of group g: k indices, strictly ascending and < chunk_size, and their values.
  void put_chunk(uint8_t* out, int g, int64_t c, const uint32_t* idx, const float* val) const;
  // Checks that data (size bytes) is a payload of exactly this format, with every index in
  // range and strictly ascending within its chunk. Throws PayloadError otherwise. No allocation.
  void validate(const uint8_t* data, int64_t size) const;
  // Reads chunk c of group g of a validated payload: k indices and decoded values.
  void get_chunk(const uint8_t* data, int g, int64_t c, uint32_t* idx, float* val) const;

 private:
  void layout();

  std::vector<SparseGroupShape> groups_;
  ValueFormat values_ = ValueFormat::kF32;
  std::vector<int64_t> index_offset_;  // byte offset of group g's indices
  std::vector<int64_t> first_entry_;   // entry number of group g's first value
  int64_t values_offset_ = 0;
  int64_t total_entries_ = 0;
  int64_t size_ = 0;
};

namespace detail {

// Bounds-checked little-endian reads for decoders: every read past `size` throws PayloadError
// naming `what`.
class WireReader {
 public:
  WireReader(const uint8_t* data, int64_t size, const char* what)
      : data_(data), size_(size), what_(what) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  float f32();
  // Returns a pointer to the next n bytes and skips them.
  const uint8_t* take(int64_t n);
  int64_t position() const { return pos_; }
  int64_t remaining() const { return size_ - pos_; }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  void need(int64_t n);
  const uint8_t* data_;
  int64_t size_;
  int64_t pos_ = 0;
  const char* what_;
};

void put_u16(uint8_t* p, uint16_t v);
void put_u32(uint8_t* p, uint32_t v);
void put_u64(uint8_t* p, uint64_t v);
void put_f32(uint8_t* p, float v);
uint32_t get_u32(const uint8_t* p);

// Magic numbers of the payload kinds ("BLSP", "BLQ8", "BLSG", "BLTK" read as little-endian).
inline constexpr uint32_t kSparseMagic = 0x50534C42u;
inline constexpr uint32_t kInt8Magic = 0x38514C42u;
inline constexpr uint32_t kSignMagic = 0x47534C42u;
inline constexpr uint32_t kTopkMagic = 0x4B544C42u;
inline constexpr uint8_t kPayloadVersion = 1;

}  // namespace detail
}  // namespace brigade
