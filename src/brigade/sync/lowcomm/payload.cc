#include "brigade/sync/lowcomm/payload.h"

#include <bit>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/tensor/bf16.h"

namespace brigade {

static_assert(std::endian::native == std::endian::little, "payloads are written little-endian");

namespace detail {

void put_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, 2);
}
void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
void put_u64(uint8_t* p, uint64_t v) {
  std::memcpy(p, &v, 8);
}
void put_f32(uint8_t* p, float v) {
  std::memcpy(p, &v, 4);
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void WireReader::fail(const std::string& why) const {
  throw PayloadError(std::string(what_) + ": " + why + " (payload of " + std::to_string(size_) +
                     " bytes, at byte " + std::to_string(pos_) + ")");
}
void WireReader::need(int64_t n) {
  if (n < 0 || n > size_ - pos_) {
    fail("needs " + std::to_string(n) + " more bytes, has " + std::to_string(size_ - pos_));
  }
}
uint8_t WireReader::u8() {
  need(1);
  return data_[pos_++];
}
uint16_t WireReader::u16() {
  need(2);
  uint16_t v;
  std::memcpy(&v, data_ + pos_, 2);
  pos_ += 2;
  return v;
}
uint32_t WireReader::u32() {
  need(4);
  uint32_t v = get_u32(data_ + pos_);
  pos_ += 4;
  return v;
}
uint64_t WireReader::u64() {
  need(8);
  uint64_t v;
  std::memcpy(&v, data_ + pos_, 8);
  pos_ += 8;
  return v;
}
float WireReader::f32() {
  need(4);
  float v;
  std::memcpy(&v, data_ + pos_, 4);
  pos_ += 4;
  return v;
}
const uint8_t* WireReader::take(int64_t n) {
  need(n);
  const uint8_t* p = data_ + pos_;
  pos_ += n;
  return p;
}

}  // namespace detail

const char* value_format_name(ValueFormat f) {
  switch (f) {
    case ValueFormat::kF32:
      return "f32";
    case ValueFormat::kBF16:
      return "bf16";
    case ValueFormat::kSign:
      return "1bit";
  }
  return "?";
}

ValueFormat parse_value_format(const std::string& name, const std::string& key) {
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16, ValueFormat::kSign}) {
    if (name == value_format_name(f)) return f;
  }
  throw ConfigError(key + " = \"" + name + "\": expected \"f32\", \"bf16\" or \"1bit\"");
}

int64_t value_bytes(ValueFormat f, int64_t n) {
  switch (f) {
    case ValueFormat::kF32:
      return 4 * n;
    case ValueFormat::kBF16:
      return 2 * n;
    case ValueFormat::kSign:
      return (n + 7) / 8;
  }
  return 0;
}

int index_bytes(int64_t chunk_size) {
  BRIGADE_CHECK(chunk_size >= 1 && chunk_size <= 65536) << "chunk size " << chunk_size;
  return chunk_size <= 256 ? 1 : 2;
}

void put_value(uint8_t* values, ValueFormat f, int64_t e, float v) {
  switch (f) {
    case ValueFormat::kF32:
      detail::put_f32(values + 4 * e, v);
      return;
    case ValueFormat::kBF16:
      detail::put_u16(values + 2 * e, float_to_bf16(v));
      return;
    case ValueFormat::kSign:
      if (v < 0.0f) values[e >> 3] |= static_cast<uint8_t>(1u << (e & 7));
      return;
  }
}

float get_value(const uint8_t* values, ValueFormat f, int64_t e) {
  switch (f) {
    case ValueFormat::kF32: {
      float v;
      std::memcpy(&v, values + 4 * e, 4);
      return v;
    }
    case ValueFormat::kBF16: {
      bf16 h;
      std::memcpy(&h, values + 2 * e, 2);
      return bf16_to_float(h);
    }
    case ValueFormat::kSign:
      return (values[e >> 3] >> (e & 7)) & 1u ? -1.0f : 1.0f;
  }
  return 0.0f;
}

float round_trip_value(ValueFormat f, float v) {
  switch (f) {
    case ValueFormat::kF32:
      return v;
    case ValueFormat::kBF16:
      return bf16_to_float(float_to_bf16(v));
    case ValueFormat::kSign:
      return v < 0.0f ? -1.0f : 1.0f;
  }
  return v;
}

// ---- Sparse chunk payload ----

namespace {
constexpr int64_t kSparseHeaderBytes = 12;
constexpr int64_t kSparseGroupBytes = 12;
}  // namespace

SparsePayloadFormat::SparsePayloadFormat(std::vector<SparseGroupShape> groups, ValueFormat values)
    : groups_(std::move(groups)), values_(values) {
  for (const auto& g : groups_) {
    BRIGADE_CHECK(g.chunk_size >= 1 && g.chunk_size <= 65536 && g.k <= g.chunk_size)
        << "group chunk_size " << g.chunk_size << " k " << g.k;
  }
  layout();
}

void SparsePayloadFormat::layout() {
  index_offset_.resize(groups_.size());
  first_entry_.resize(groups_.size());
  int64_t pos = kSparseHeaderBytes + kSparseGroupBytes * static_cast<int64_t>(groups_.size());
  int64_t entries = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int64_t n = int64_t{groups_[g].num_chunks} * groups_[g].k;
    index_offset_[g] = pos;
    first_entry_[g] = entries;
    pos += n * index_bytes(groups_[g].chunk_size);
    entries += n;
  }
  values_offset_ = pos;
  total_entries_ = entries;
  size_ = pos + value_bytes(values_, entries);
}

SparsePayloadFormat SparsePayloadFormat::from_header(const uint8_t* data, int64_t size) {
  detail::WireReader in(data, size, "sparse payload");
  if (in.u32() != detail::kSparseMagic) in.fail("bad magic (not a sparse chunk payload)");
  const uint8_t version = in.u8();
  if (version != detail::kPayloadVersion) in.fail("version " + std::to_string(version));
  const uint8_t format = in.u8();
  if (format > static_cast<uint8_t>(ValueFormat::kSign)) {
    in.fail("value format " + std::to_string(format));
  }
  if (in.u16() != 0) in.fail("reserved bytes not zero");
  const uint32_t num_groups = in.u32();
  if (num_groups > in.remaining() / kSparseGroupBytes) {
    in.fail(std::to_string(num_groups) + " groups do not fit");
  }
  SparsePayloadFormat f;
  f.values_ = static_cast<ValueFormat>(format);
  f.groups_.resize(num_groups);
  // Bound the implied length as we go so no product or sum can overflow.
  int64_t implied = kSparseHeaderBytes + kSparseGroupBytes * int64_t{num_groups};
  for (uint32_t g = 0; g < num_groups; ++g) {
    SparseGroupShape s{in.u32(), in.u32(), in.u32()};
    const std::string where = "group " + std::to_string(g) + ": ";
    if (s.chunk_size < 1 || s.chunk_size > 65536) {
      in.fail(where + "chunk size " + std::to_string(s.chunk_size));
    }
    if (s.k > s.chunk_size) {
      in.fail(where + "k " + std::to_string(s.k) + " > chunk size " + std::to_string(s.chunk_size));
    }
    const uint64_t entries = uint64_t{s.num_chunks} * s.k;  // < 2^64
    if (entries > static_cast<uint64_t>(size)) in.fail(where + "too many entries");
    implied += static_cast<int64_t>(entries) * (index_bytes(s.chunk_size));
    implied += value_bytes(f.values_, static_cast<int64_t>(entries));
    if (implied > size) in.fail(where + "implies more bytes than the payload has");
    f.groups_[g] = s;
  }
  f.layout();
  if (f.size_ != size) {
    in.fail("header implies " + std::to_string(f.size_) + " bytes, payload has " +
            std::to_string(size));
  }
  return f;
}

void SparsePayloadFormat::begin(uint8_t* out) const {
  detail::put_u32(out, detail::kSparseMagic);
  out[4] = detail::kPayloadVersion;
  out[5] = static_cast<uint8_t>(values_);
  detail::put_u16(out + 6, 0);
  detail::put_u32(out + 8, static_cast<uint32_t>(groups_.size()));
  uint8_t* p = out + kSparseHeaderBytes;
  for (const auto& g : groups_) {
    detail::put_u32(p, g.chunk_size);
    detail::put_u32(p + 4, g.num_chunks);
    detail::put_u32(p + 8, g.k);
    p += kSparseGroupBytes;
  }
  if (values_ == ValueFormat::kSign) {
    std::memset(out + values_offset_, 0, static_cast<size_t>(size_ - values_offset_));
  }
}

void SparsePayloadFormat::put_chunk(uint8_t* out, int g, int64_t c, const uint32_t* idx,
                                    const float* val) const {
  const SparseGroupShape& s = groups_[g];
  BRIGADE_CHECK(c >= 0 && c < s.num_chunks) << "chunk " << c << " of " << s.num_chunks;
  const int width = index_bytes(s.chunk_size);
  uint8_t* ip = out + index_offset_[g] + c * s.k * width;
  uint8_t* values = out + values_offset_;
  const int64_t first = first_entry_[g] + c * s.k;
  for (uint32_t j = 0; j < s.k; ++j) {
    BRIGADE_CHECK(idx[j] < s.chunk_size && (j == 0 || idx[j] > idx[j - 1]))
        << "index " << idx[j] << " at " << j << " of chunk " << c;
    if (width == 1) {
      ip[j] = static_cast<uint8_t>(idx[j]);
    } else {
      detail::put_u16(ip + 2 * j, static_cast<uint16_t>(idx[j]));
    }
    put_value(values, values_, first + j, val[j]);
  }
}

void SparsePayloadFormat::validate(const uint8_t* data, int64_t size) const {
  detail::WireReader in(data, size, "sparse payload");
  if (size != size_) {
    in.fail("length " + std::to_string(size) + ", expected " + std::to_string(size_));
  }
  if (in.u32() != detail::kSparseMagic) in.fail("bad magic");
  if (in.u8() != detail::kPayloadVersion) in.fail("bad version");
  const uint8_t format = in.u8();
  if (format != static_cast<uint8_t>(values_)) {
    in.fail("value format " + std::to_string(format) + ", expected " + value_format_name(values_));
  }
  if (in.u16() != 0) in.fail("reserved bytes not zero");
  if (in.u32() != groups_.size()) in.fail("group count differs from this replica's layout");
  for (size_t g = 0; g < groups_.size(); ++g) {
    SparseGroupShape s{in.u32(), in.u32(), in.u32()};
    if (!(s == groups_[g])) {
      in.fail("group " + std::to_string(g) + " is (chunk " + std::to_string(s.chunk_size) +
              ", chunks " + std::to_string(s.num_chunks) + ", k " + std::to_string(s.k) +
              "), this replica expects (" + std::to_string(groups_[g].chunk_size) + ", " +
              std::to_string(groups_[g].num_chunks) + ", " + std::to_string(groups_[g].k) +
              "): do all replicas run the same config and model?");
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const SparseGroupShape& s = groups_[g];
    const bool narrow = index_bytes(s.chunk_size) == 1;
    const uint8_t* ip = data + index_offset_[g];
    for (int64_t c = 0; c < s.num_chunks; ++c) {
      int64_t prev = -1;
      for (uint32_t j = 0; j < s.k; ++j) {
        uint16_t i16;
        if (narrow) {
          i16 = *ip++;
        } else {
          std::memcpy(&i16, ip, 2);
          ip += 2;
        }
        if (i16 >= s.chunk_size || i16 <= prev) {
          throw PayloadError("sparse payload: group " + std::to_string(g) + " chunk " +
                             std::to_string(c) + ": index " + std::to_string(i16) +
                             (i16 >= s.chunk_size ? " out of range" : " not ascending"));
        }
        prev = i16;
      }
    }
  }
}

void SparsePayloadFormat::get_chunk(const uint8_t* data, int g, int64_t c, uint32_t* idx,
                                    float* val) const {
  const SparseGroupShape& s = groups_[g];
  const int width = index_bytes(s.chunk_size);
  const uint8_t* ip = data + index_offset_[g] + c * s.k * width;
  const uint8_t* values = data + values_offset_;
  const int64_t first = first_entry_[g] + c * s.k;
  for (uint32_t j = 0; j < s.k; ++j) {
    if (width == 1) {
      idx[j] = ip[j];
    } else {
      uint16_t v;
      std::memcpy(&v, ip + 2 * j, 2);
      idx[j] = v;
    }
    val[j] = get_value(values, values_, first + j);
  }
}

}  // namespace brigade
