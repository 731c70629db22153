// Wire encodings: round trips for every value format with sizes computed here from the
// documented layout, and corrupt payloads (truncated, extended, wrong magic/version/format,
// wrong shape, bad indices, random header damage) rejected with PayloadError.
#include "brigade/sync/lowcomm/payload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "brigade/sync/lowcomm/int8_quant.h"
#include "brigade/sync/lowcomm/topk.h"
#include "brigade/tensor/bf16.h"
#include "brigade/tensor/rng.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

TEST(ValueFormat, BytesNamesAndRounding) {
  EXPECT_EQ(value_bytes(ValueFormat::kF32, 10), 40);
  EXPECT_EQ(value_bytes(ValueFormat::kBF16, 10), 20);
  EXPECT_EQ(value_bytes(ValueFormat::kSign, 0), 0);
  EXPECT_EQ(value_bytes(ValueFormat::kSign, 1), 1);
  EXPECT_EQ(value_bytes(ValueFormat::kSign, 8), 1);
  EXPECT_EQ(value_bytes(ValueFormat::kSign, 9), 2);
  EXPECT_EQ(index_bytes(1), 1);
  EXPECT_EQ(index_bytes(256), 1);
  EXPECT_EQ(index_bytes(257), 2);
  EXPECT_EQ(index_bytes(4096), 2);
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16, ValueFormat::kSign}) {
    EXPECT_EQ(parse_value_format(value_format_name(f), "k"), f);
  }
  EXPECT_THROW(parse_value_format("int4", "demo.values"), ConfigError);
  EXPECT_EQ(round_trip_value(ValueFormat::kSign, -0.3f), -1.0f);
  EXPECT_EQ(round_trip_value(ValueFormat::kSign, 0.0f), 1.0f);
  EXPECT_EQ(round_trip_value(ValueFormat::kBF16, 1.00390625f), 1.0f);  // 1 + 2^-8 ties to even
}

// Groups like a DeMo layout: a 64x64 chunking (uint16 indices), rows of 50 (uint8), one 5x7
// block with k = its size, and an empty group.
std::vector<SparseGroupShape> demo_groups() {
  return {{4096, 6, 32}, {50, 2, 32}, {35, 1, 35}, {16, 0, 4}, {256, 3, 5}};
}

int64_t expected_size(const std::vector<SparseGroupShape>& groups, ValueFormat f) {
  int64_t size = 12 + 12 * static_cast<int64_t>(groups.size()), entries = 0;
  for (const auto& g : groups) {
    size += int64_t{g.num_chunks} * g.k * (g.chunk_size <= 256 ? 1 : 2);
    entries += int64_t{g.num_chunks} * g.k;
  }
  const int64_t vb = f == ValueFormat::kF32    ? 4 * entries
                     : f == ValueFormat::kBF16 ? 2 * entries
                                               : (entries + 7) / 8;
  return size + vb;
}

// Writes a payload whose chunk contents are the top-k of random data; returns it.
std::vector<uint8_t> make_sparse(const SparsePayloadFormat& fmt, uint64_t seed,
                                 std::vector<std::vector<uint32_t>>* idx_out = nullptr,
                                 std::vector<std::vector<float>>* val_out = nullptr) {
  std::vector<uint8_t> buf(fmt.size_bytes());
  fmt.begin(buf.data());
  for (size_t g = 0; g < fmt.groups().size(); ++g) {
    const SparseGroupShape s = fmt.groups()[g];
    for (uint32_t c = 0; c < s.num_chunks; ++c) {
      std::vector<float> x = testutil::normal_vector(
          s.chunk_size, seed, "chunk/" + std::to_string(g) + "/" + std::to_string(c));
      std::vector<float> scratch(s.chunk_size);
      std::vector<uint32_t> idx(s.k);
      std::vector<float> val(s.k);
      topk_abs(x.data(), s.chunk_size, s.k, scratch.data(), idx.data(), val.data());
      fmt.put_chunk(buf.data(), static_cast<int>(g), c, idx.data(), val.data());
      if (idx_out) idx_out->push_back(idx);
      if (val_out) val_out->push_back(val);
    }
  }
  return buf;
}

TEST(SparsePayload, RoundTripsEveryFormatWithExactSize) {
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16, ValueFormat::kSign}) {
    SparsePayloadFormat fmt(demo_groups(), f);
    ASSERT_EQ(fmt.size_bytes(), expected_size(demo_groups(), f)) << value_format_name(f);
    std::vector<std::vector<uint32_t>> idx;
    std::vector<std::vector<float>> val;
    std::vector<uint8_t> buf = make_sparse(fmt, 1, &idx, &val);
    ASSERT_NO_THROW(fmt.validate(buf.data(), buf.size()));
    SparsePayloadFormat parsed = SparsePayloadFormat::from_header(buf.data(), buf.size());
    EXPECT_EQ(parsed.groups(), demo_groups());
    EXPECT_EQ(parsed.values(), f);
    size_t chunk = 0;
    for (size_t g = 0; g < fmt.groups().size(); ++g) {
      const SparseGroupShape s = fmt.groups()[g];
      for (uint32_t c = 0; c < s.num_chunks; ++c, ++chunk) {
        std::vector<uint32_t> gi(s.k);
        std::vector<float> gv(s.k);
        parsed.get_chunk(buf.data(), static_cast<int>(g), c, gi.data(), gv.data());
        EXPECT_EQ(gi, idx[chunk]);
        for (uint32_t j = 0; j < s.k; ++j) {
          const float v = val[chunk][j];
          const float want = f == ValueFormat::kF32    ? v
                             : f == ValueFormat::kBF16 ? bf16_to_float(float_to_bf16(v))
                                                       : (v < 0 ? -1.0f : 1.0f);
          ASSERT_EQ(gv[j], want) << value_format_name(f) << " group " << g << " chunk " << c;
        }
      }
    }
  }
}

TEST(SparsePayload, DisTrOByteCount) {
  // 40B-run settings: chunk 64x64, k 4, 1-bit: 4 * (2 B + 1/8 B) = 8.5 bytes per chunk.
  SparsePayloadFormat fmt({{4096, 1000, 4}}, ValueFormat::kSign);
  EXPECT_EQ(fmt.size_bytes() - 24, 8500);
}

void expect_rejected(const SparsePayloadFormat& fmt, const std::vector<uint8_t>& buf,
                     const std::string& what) {
  EXPECT_THROW(fmt.validate(buf.data(), buf.size()), PayloadError) << what;
}

TEST(SparsePayload, CorruptPayloadsRejected) {
  SparsePayloadFormat fmt(demo_groups(), ValueFormat::kBF16);
  const std::vector<uint8_t> good = make_sparse(fmt, 2);
  // Every truncation and one extra byte.
  for (size_t len = 0; len < good.size(); len += (len < 200 ? 1 : 97)) {
    std::vector<uint8_t> b(good.begin(), good.begin() + len);
    expect_rejected(fmt, b, "truncated to " + std::to_string(len));
    EXPECT_THROW(SparsePayloadFormat::from_header(b.data(), b.size()), PayloadError) << len;
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  expect_rejected(fmt, longer, "one byte too long");
  EXPECT_THROW(SparsePayloadFormat::from_header(longer.data(), longer.size()), PayloadError);

  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[at] = v;
    return b;
  };
  expect_rejected(fmt, with(0, 'X'), "magic");
  expect_rejected(fmt, with(4, 2), "version");
  expect_rejected(fmt, with(5, 0), "value format f32 instead of bf16");
  expect_rejected(fmt, with(5, 9), "unknown value format");
  expect_rejected(fmt, with(6, 1), "reserved");
  expect_rejected(fmt, with(8, 4), "group count");
  expect_rejected(fmt, with(13, 0), "chunk size of group 0");
  expect_rejected(fmt, with(12 + 8, 33), "k of group 0");
  // Indices: group 1 (chunk 50, uint8) starts after group 0's 6 * 32 uint16 indices.
  const size_t g1 = 12 + 12 * demo_groups().size() + 6 * 32 * 2;
  expect_rejected(fmt, with(g1, 50), "index == chunk size");
  std::vector<uint8_t> dup = good;
  dup[g1 + 1] = dup[g1];
  expect_rejected(fmt, dup, "repeated index");
  std::vector<uint8_t> big = good;  // a uint16 index of group 0 >= 4096
  big[12 + 12 * demo_groups().size() + 1] = 0xff;
  expect_rejected(fmt, big, "uint16 index out of range");
  // A header claiming 2^32 - 1 chunks must fail on length, not overflow or allocate.
  std::vector<uint8_t> huge = good;
  std::memset(huge.data() + 12 + 4, 0xff, 4);
  EXPECT_THROW(SparsePayloadFormat::from_header(huge.data(), huge.size()), PayloadError);
  std::vector<uint8_t> groups = good;
  std::memset(groups.data() + 8, 0xff, 4);
  EXPECT_THROW(SparsePayloadFormat::from_header(groups.data(), groups.size()), PayloadError);
}

TEST(SparsePayload, RandomHeaderDamageNeverCrashes) {
  SparsePayloadFormat fmt(demo_groups(), ValueFormat::kF32);
  const std::vector<uint8_t> good = make_sparse(fmt, 3);
  const size_t header = 12 + 12 * demo_groups().size();
  int rejected = 0;
  for (uint64_t t = 0; t < 2000; ++t) {
    std::vector<uint8_t> b = good;
    const size_t at = static_cast<size_t>(random_uniform(4, 1, t) * header);
    const uint8_t v = static_cast<uint8_t>(random_uniform(4, 2, t) * 256);
    if (b[at] == v) continue;
    b[at] = v;
    bool threw = false;
    try {
      fmt.validate(b.data(), b.size());
    } catch (const PayloadError&) {
      threw = true;
    }
    // Any header change makes it a payload of another shape or invalid.
    EXPECT_TRUE(threw) << "byte " << at << " = " << int{v};
    rejected += threw;
    try {
      SparsePayloadFormat::from_header(b.data(), b.size());
    } catch (const PayloadError&) {
    }
  }
  EXPECT_GT(rejected, 1000);
}

// ---- int8 ----

TEST(Int8Codec, MatchesTheFormulaAndPreservesChunkSums) {
  const int64_t n = 5000, chunk = 1024;  // 5 chunks, the last of 904
  std::vector<float> x = testutil::normal_vector(n, 5, "int8", 0.3f);
  x[17] = 40.0f;  // far tail: clamps to bin 255
  x[2000] = -25.0f;
  Int8Codec codec(n, chunk);
  ASSERT_EQ(codec.size_bytes(), 24 + 5 * 1024 + n);
  std::vector<uint8_t> buf(codec.size_bytes());
  codec.encode(x.data(), buf.data());
  ASSERT_NO_THROW(codec.validate(buf.data(), buf.size()));
  std::vector<float> y(n);
  codec.decode(buf.data(), y.data());
  int64_t checked = 0;
  for (int64_t lo = 0; lo < n; lo += chunk) {
    const int64_t m = std::min(chunk, n - lo);
    double sq = 0.0, sx = 0.0, sy = 0.0;
    for (int64_t i = lo; i < lo + m; ++i) {
      sq += double{x[i]} * x[i];
      sx += x[i];
      sy += y[i];
    }
    const double scale = 6.0 * std::sqrt(sq / (m - 1)) / 256.0;
    const uint8_t* q = buf.data() + 24 + (lo / chunk) * (1024 + chunk) + 1024;
    for (int64_t i = lo; i < lo + m; ++i) {
      const double r = x[i] / scale;
      const double frac = std::fabs(r - std::floor(r) - 0.5);
      if (frac > 1e-3) {  // away from a rounding boundary: the bin is the formula's
        const int want = static_cast<int>(std::clamp(std::nearbyint(r) + 128.0, 0.0, 255.0));
        ASSERT_EQ(q[i - lo], want) << i;
        ++checked;
      }
      if (std::fabs(r) < 127.0) {
        EXPECT_LE(std::fabs(y[i] - x[i]), scale * 1.0001) << i;
      }
    }
    // Bin means keep each chunk's sum.
    EXPECT_NEAR(sy, sx, 1e-4 * (1.0 + std::fabs(sx))) << "chunk at " << lo;
  }
  EXPECT_GT(checked, n * 9 / 10);
  // The clamped outliers decode to their own value: they are alone in their bins.
  EXPECT_FLOAT_EQ(y[17], 40.0f);
  EXPECT_FLOAT_EQ(y[2000], -25.0f);
}

TEST(Int8Codec, ConstantAndEmptyChunks) {
  std::vector<float> zeros(300, 0.0f), out(300, 1.0f);
  Int8Codec codec(300, 128);
  std::vector<uint8_t> buf(codec.size_bytes());
  codec.encode(zeros.data(), buf.data());
  codec.decode(buf.data(), out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
  std::vector<float> one = {2.5f};  // n = 1: sigma uses max(n - 1, 1)
  Int8Codec single(1, 16);
  std::vector<uint8_t> b1(single.size_bytes());
  single.encode(one.data(), b1.data());
  float back = 0.0f;
  single.decode(b1.data(), &back);
  EXPECT_EQ(back, 2.5f);
  Int8Codec empty(0, 16);
  EXPECT_EQ(empty.size_bytes(), 24);
}

TEST(Int8Codec, CorruptPayloadsRejected) {
  Int8Codec codec(1000, 256);
  std::vector<float> x = testutil::normal_vector(1000, 6, "int8c");
  std::vector<uint8_t> good(codec.size_bytes());
  codec.encode(x.data(), good.data());
  for (size_t len : {size_t{0}, size_t{3}, size_t{23}, size_t{24}, good.size() - 1}) {
    EXPECT_THROW(codec.validate(good.data(), len), PayloadError) << len;
  }
  for (size_t at :
       {size_t{0}, size_t{4}, size_t{5}, size_t{8}, size_t{15}, size_t{16}, size_t{20}}) {
    std::vector<uint8_t> b = good;
    b[at] ^= 0x5a;
    EXPECT_THROW(codec.validate(b.data(), b.size()), PayloadError) << "byte " << at;
  }
  Int8Codec other(1000, 128);
  EXPECT_THROW(other.validate(good.data(), good.size()), PayloadError);
}

}  // namespace
}  // namespace brigade
