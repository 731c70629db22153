// Untrusted JSON in checkpoint-side files (issue 13, defect 3): a safetensors header or an HF
// config.json nested 100,000 deep crashed (SIGSEGV in dump() while building the error message);
// now each is an IoError naming the file, and messages quote values in short excerpts. The
// crash-prone cases run in a child process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "brigade/base/error.h"
#include "brigade/ckpt/hf_gpt2.h"
#include "brigade/ckpt/safetensors.h"
#include "common/run_command.h"
#include "common/run_in_child.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::run_in_child;
using testing::TempDir;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string nested(int depth) {
  return repeat("[", depth) + "1" + repeat("]", depth);
}

// A safetensors file: 8-byte length, the header, 4 bytes of data.
std::string safetensors_with(const std::string& header) {
  std::string out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(4, '\0');
}

TEST(JsonBounds, DeepSafetensorsHeadersAreIoErrorsNamingTheFile) {
  TempDir dir;
  const std::string deep = nested(100'000);
  for (const std::string& header : {
           R"({"a":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[)" + deep + ",4]}}",
           R"({"a":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,4]}})",
       }) {
    testing::write_raw(dir / "deep.safetensors", safetensors_with(header));
    const auto r = run_in_child([&] { SafetensorsFile::open(dir / "deep.safetensors"); }, 30);
    EXPECT_EQ(r.exit_code, kExitIo) << r.describe();
    EXPECT_THAT(r.message, HasSubstr("invalid safetensors file " + (dir / "deep.safetensors") +
                                     ": header: JSON nests deeper than"));
  }
}

TEST(JsonBounds, ShallowButWrongValuesAreQuotedShortly) {
  TempDir dir;
  // Within the depth limit, but a 400 KB shape (that overflows) and a 1 MB name in the messages.
  std::string big_shape;
  for (int i = 0; i < 200'000; ++i) big_shape += "2,";
  big_shape += "2";
  const std::string long_name(1'000'000, 'n');
  for (const std::string& header : {
           R"({"a":{"dtype":"F32","shape":[)" + big_shape + R"(],"data_offsets":[0,4]}})",
           "{\"" + long_name + R"(":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})",
       }) {
    testing::write_raw(dir / "f.safetensors", safetensors_with(header));
    try {
      SafetensorsFile::open(dir / "f.safetensors");
      ADD_FAILURE();
    } catch (const IoError& e) {
      EXPECT_THAT(e.what(), HasSubstr(dir / "f.safetensors"));
      EXPECT_LT(std::string(e.what()).size(), 1000u);
    }
  }
}

TEST(JsonBounds, DeepHfConfigIsAnIoErrorNamingTheFile) {
  TempDir dir;
  testing::write_raw(dir / "config.json",
                     R"({"model_type":"gpt2","vocab_size":256,"n_layer":)" + nested(100'000) + "}");
  const auto r = run_in_child([&] { load_hf_gpt2_config(dir.path()); }, 30);
  EXPECT_EQ(r.exit_code, kExitIo) << r.describe();
  EXPECT_THAT(r.message, HasSubstr(dir / "config.json" + ": JSON nests deeper than 64"));
  // Shallow, but an array of 100,000 where an integer belongs: quoted in a short excerpt.
  std::string wide = "[";
  for (int i = 0; i < 100'000; ++i) wide += "1,";
  testing::write_raw(dir / "config.json", R"({"model_type":"gpt2","vocab_size":)" + wide + "1]}");
  try {
    load_hf_gpt2_config(dir.path());
    ADD_FAILURE();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"vocab_size\" = [1,1,1,"));
    EXPECT_LT(std::string(e.what()).size(), 1000u);
  }
}

}  // namespace
}  // namespace brigade
