#include "brigade/ckpt/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/tensor/bf16.h"
#include "brigade/tensor/rng.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using testing::TempDir;

// The framing of the format, written from its definition: 8-byte little-endian length, the
// JSON padded with spaces to a multiple of 8, then the data. Independent of the writer.
std::string frame(std::string json, const std::string& data) {
  while (json.size() % 8 != 0) json += ' ';
  std::string out;
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

std::vector<float> normal(int64_t n, uint64_t key) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, 1.0f, 1234, key);
  return v;
}

StTensorView f32_view(const std::string& name, std::vector<int64_t> shape,
                      const std::vector<float>& v) {
  return StTensorView{.name = name,
                      .dtype = StDtype::kF32,
                      .shape = std::move(shape),
                      .data = v.data(),
                      .nbytes = static_cast<int64_t>(v.size() * 4)};
}

// The example of the format's documentation: one F32 tensor "attn.0" of shape (1, 2, 3) holding
// 0..5. Every byte is spelled out: the 64-byte JSON needs no padding, and the floats are their
// IEEE-754 little-endian encodings.
const std::string kAttn0Bytes =
    std::string("\x40\0\0\0\0\0\0\0", 8) +
    R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" +
    std::string(
        "\x00\x00\x00\x00"   // 0.0
        "\x00\x00\x80\x3f"   // 1.0
        "\x00\x00\x00\x40"   // 2.0
        "\x00\x00\x40\x40"   // 3.0
        "\x00\x00\x80\x40"   // 4.0
        "\x00\x00\xa0\x40",  // 5.0
        24);

TEST(Safetensors, WriterProducesTheSpecifiedBytes) {
  TempDir dir;
  ASSERT_EQ(kAttn0Bytes.size(), 8u + 64u + 24u);
  const std::vector<float> v = {0, 1, 2, 3, 4, 5};
  const std::vector<StTensorView> views = {f32_view("attn.0", {1, 2, 3}, v)};
  const FileDigest d = write_safetensors(dir / "a.safetensors", views);
  EXPECT_EQ(testing::read_raw(dir / "a.safetensors"), kAttn0Bytes);
  EXPECT_EQ(d.bytes, static_cast<int64_t>(kAttn0Bytes.size()));
  EXPECT_EQ(d.crc32, crc32_of(kAttn0Bytes));
}

TEST(Safetensors, ReaderParsesHandBuiltFile) {
  TempDir dir;
  testing::write_raw(dir / "a.safetensors", kAttn0Bytes);
  const SafetensorsFile f = SafetensorsFile::open(dir / "a.safetensors");
  ASSERT_EQ(f.names(), std::vector<std::string>{"attn.0"});
  EXPECT_EQ(f.info("attn.0").dtype, StDtype::kF32);
  EXPECT_EQ(f.info("attn.0").shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(f.metadata().empty());
  std::vector<float> out(6, -1.0f);
  f.read_f32("attn.0", out.data(), 6);
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Safetensors, EmptyFileWithAndWithoutMetadata) {
  TempDir dir;
  write_safetensors(dir / "e", {});
  EXPECT_EQ(testing::read_raw(dir / "e"), frame("{}", ""));
  EXPECT_EQ(testing::read_raw(dir / "e").size(), 16u);
  write_safetensors(dir / "m", {}, {{"framework", "pt"}});
  EXPECT_EQ(testing::read_raw(dir / "m"), frame(R"({"__metadata__":{"framework":"pt"}})", ""));
  EXPECT_EQ(SafetensorsFile::open(dir / "m").metadata().at("framework"), "pt");
}

// Mixed dtypes: the widest goes first (alignment), then names in order; offsets are contiguous.
TEST(Safetensors, MixedDtypesMatchHandBuiltLayout) {
  TempDir dir;
  const std::vector<float> a = {1.5f};
  const uint16_t b = 0x3f80;  // bf16 1.0
  const int32_t c = -7;
  const std::vector<StTensorView> views = {
      {.name = "b", .dtype = StDtype::kBF16, .shape = {1}, .data = &b, .nbytes = 2},
      {.name = "z", .dtype = StDtype::kF32, .shape = {}, .data = a.data(), .nbytes = 4},
      {.name = "c", .dtype = StDtype::kI32, .shape = {1, 1}, .data = &c, .nbytes = 4},
  };
  write_safetensors(dir / "x", views, {{"k", "v"}});
  const std::string expected = frame(R"({"__metadata__":{"k":"v"},)"
                                     R"("z":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                                     R"("c":{"dtype":"I32","shape":[1,1],"data_offsets":[4,8]},)"
                                     R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]}})",
                                     std::string("\x00\x00\xc0\x3f"  // 1.5f
                                                 "\xf9\xff\xff\xff"  // -7
                                                 "\x80\x3f",         // bf16 1.0
                                                 10));
  EXPECT_EQ(testing::read_raw(dir / "x"), expected);
}

TEST(Safetensors, RoundTripSeveralTensorsAndMetadata) {
  TempDir dir;
  const std::vector<float> w = normal(48 * 32, 1), bias = normal(48, 2), scalar = {3.25f};
  const std::vector<float> empty;
  const std::vector<int32_t> ids = {5, -1, 1 << 30};
  const std::vector<uint16_t> u = {0, 65535};
  std::vector<StTensorView> views = {
      f32_view("h.0.weight", {48, 32}, w),
      f32_view("h.0.bias", {48}, bias),
      f32_view("scale", {}, scalar),
      f32_view("nothing", {0, 3}, empty),
      {.name = "ids", .dtype = StDtype::kI32, .shape = {3}, .data = ids.data(), .nbytes = 12},
      {.name = "u", .dtype = StDtype::kU16, .shape = {2}, .data = u.data(), .nbytes = 4}};
  const StMetadata meta = {{"format", "pt"}, {"step", "100"}};
  const FileDigest d = write_safetensors(dir / "r.safetensors", views, meta);
  EXPECT_EQ(digest_file(dir / "r.safetensors"), d);

  const SafetensorsFile f = SafetensorsFile::open(dir / "r.safetensors");
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.names().size(), views.size());
  for (const StTensorView& v : views) {
    ASSERT_TRUE(f.contains(v.name)) << v.name;
    const StTensorInfo& info = f.info(v.name);
    EXPECT_EQ(info.dtype, v.dtype) << v.name;
    EXPECT_EQ(info.shape, v.shape) << v.name;
    EXPECT_EQ(info.end - info.begin, v.nbytes) << v.name;
    EXPECT_EQ(info.begin % st_dtype_size(info.dtype), 0) << "misaligned " << v.name;
    std::vector<char> raw(static_cast<size_t>(v.nbytes));
    f.read_raw(v.name, raw.data(), v.nbytes);
    if (v.nbytes > 0) {
      EXPECT_EQ(std::memcmp(raw.data(), v.data, raw.size()), 0) << v.name;
    }
  }
  std::vector<float> got(w.size());
  f.read_f32("h.0.weight", got.data(), static_cast<int64_t>(got.size()));
  EXPECT_EQ(std::memcmp(got.data(), w.data(), w.size() * 4), 0);
  f.read_f32("nothing", nullptr, 0);
}

TEST(Safetensors, ReadF32WidensBf16AndF16) {
  TempDir dir;
  const std::vector<float> src = normal(1001, 3);
  std::vector<uint16_t> b(src.size());
  for (size_t i = 0; i < src.size(); ++i) b[i] = float_to_bf16(src[i]);
  // binary16 encodings with their exact values.
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x3800, 0x0001, 0x03ff, 0x0400,
                                   0x7bff, 0x7c00, 0xfc00, 0x8000, 0x3555};
  const std::vector<float> h_values = {1.0f,
                                       -2.0f,
                                       0.5f,
                                       std::ldexp(1.0f, -24),
                                       1023 * std::ldexp(1.0f, -24),
                                       std::ldexp(1.0f, -14),
                                       65504.0f,
                                       INFINITY,
                                       -INFINITY,
                                       -0.0f,
                                       0x555 * std::ldexp(1.0f, -12)};
  const uint16_t nan16 = 0x7e00;
  const std::vector<StTensorView> views = {
      {.name = "b", .dtype = StDtype::kBF16, .shape = {1001}, .data = b.data(), .nbytes = 2002},
      {.name = "h", .dtype = StDtype::kF16, .shape = {11}, .data = h.data(), .nbytes = 22},
      {.name = "n", .dtype = StDtype::kF16, .shape = {}, .data = &nan16, .nbytes = 2}};
  write_safetensors(dir / "w", views);
  const SafetensorsFile f = SafetensorsFile::open(dir / "w");
  std::vector<float> out(1001);
  f.read_f32("b", out.data(), 1001);
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(out[i], bf16_to_float(b[i])) << i;
  out.assign(11, 0.0f);
  f.read_f32("h", out.data(), 11);
  for (size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(out[i], h_values[i]) << std::hex << h[i];
    EXPECT_EQ(std::signbit(out[i]), std::signbit(h_values[i])) << std::hex << h[i];
  }
  float nan_out = 0;
  f.read_f32("n", &nan_out, 1);
  EXPECT_TRUE(std::isnan(nan_out));
}

TEST(Safetensors, AccessErrorsNameTheFileAndTensor) {
  TempDir dir;
  const std::vector<int32_t> ids = {1, 2};
  const std::vector<StTensorView> views = {
      {.name = "ids", .dtype = StDtype::kI32, .shape = {2}, .data = ids.data(), .nbytes = 8}};
  write_safetensors(dir / "f", views);
  const SafetensorsFile f = SafetensorsFile::open(dir / "f");
  float out[3];
  EXPECT_THROW_WITH(f.info("missing"), IoError, dir / "f", "missing");
  EXPECT_THROW_WITH(f.read_f32("ids", out, 2), IoError, dir / "f", "ids", "I32");
  EXPECT_THROW_WITH(f.read_raw("ids", out, 12), IoError, dir / "f", "ids", "8 bytes");
  EXPECT_THROW_WITH(SafetensorsFile::open(dir / "none"), IoError, dir / "none");
}

// Each malformed file must be refused with an IoError naming the path and the problem.
struct Malformed {
  const char* label;
  std::string bytes;
  const char* needle;
};

TEST(Safetensors, MalformedFilesAreRejected) {
  const std::string f24(24, '\0');
  const std::string entry = R"("dtype":"F32","shape":[2,3],"data_offsets":[0,24])";
  const std::vector<Malformed> cases = {
      {"short", std::string("\x08\0\0", 3), "fewer than the 8-byte"},
      {"huge_header", std::string("\x01\xe1\xf5\x05\0\0\0\0", 8) + "{}", "exceeds the limit"},
      {"header_past_eof", std::string("\x40\0\0\0\0\0\0\0{}", 10), "exceeds the 2 bytes"},
      {"max_u64_header", std::string(8, '\xff') + "{}", "exceeds the limit"},
      {"bad_json", frame(R"({"a":{"dtype":)", ""), "not valid JSON"},
      {"bad_utf8", frame("{\"\xff\":1}", ""), "not valid JSON"},
      {"not_object", frame("[1,2]", ""), "not a JSON object"},
      {"entry_not_object", frame(R"({"a":7})", ""), "entry is not an object"},
      {"unknown_dtype",
       frame(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "unknown dtype"},
      {"negative_dim",
       frame(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "shape entry"},
      {"float_dim",
       frame(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "shape entry"},
      {"no_offsets", frame(R"({"a":{"dtype":"F32","shape":[1]}})", std::string(4, '\0')),
       "data_offsets"},
      {"reversed_offsets",
       frame(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", std::string(4, '\0')),
       "invalid"},
      {"offsets_out_of_range", frame("{\"a\":{" + entry + "}}", std::string(16, '\0')),
       "run past the end"},
      {"shape_size_mismatch",
       frame(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,24]}})", f24), "needs 16"},
      {"overflowing_shape",
       frame(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})",
             std::string(4, '\0')),
       "overflows"},
      {"overlap",
       frame(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             std::string(12, '\0')),
       "overlap"},
      {"gap",
       frame(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             std::string(12, '\0')),
       "gap"},
      {"trailing_bytes", frame("{\"a\":{" + entry + "}}", f24 + "xxxx"), "trailing bytes"},
      {"metadata_not_string", frame(R"({"__metadata__":{"k":1}})", ""), "not a string"},
  };
  TempDir dir;
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = dir / (std::string(c.label) + ".safetensors");
    testing::write_raw(path, c.bytes);
    EXPECT_THROW_WITH(SafetensorsFile::open(path), IoError, path, c.needle);
  }
}

TEST(Safetensors, TruncatedFileIsRejected) {
  TempDir dir;
  const std::vector<float> w = normal(64, 4);
  const std::vector<StTensorView> views = {f32_view("w", {8, 8}, w)};
  write_safetensors(dir / "t", views);
  std::string bytes = testing::read_raw(dir / "t");
  for (size_t cut : {size_t{1}, size_t{4}, size_t{256}, bytes.size() - 9, bytes.size() - 4}) {
    SCOPED_TRACE(cut);
    testing::write_raw(dir / "t", bytes.substr(0, bytes.size() - cut));
    EXPECT_THROW_WITH(SafetensorsFile::open(dir / "t"), IoError, dir / "t");
  }
}

}  // namespace
}  // namespace brigade
