// The manifest's seal and `latest`'s CRC (ckpt/manifest.h) against every single-bit flip and
// every truncation: the reference is simply that a changed byte can never be accepted as the
// manifest that was written (a CRC-32 detects every 1-bit error and every burst up to 32 bits).
#include <gtest/gtest.h>

#include <string>

#include "brigade/base/error.h"
#include "brigade/ckpt/manifest.h"
#include "ckpt/checkpoint_test_util.h"

namespace brigade {
namespace {

Manifest sample_manifest() {
  Manifest m;
  m.format_version = kShardedCheckpointFormatVersion;
  m.step = 100;
  m.files["rank_00000.safetensors"] = FileDigest{4096, 0x1234abcd};
  m.state = testing::fake_state(100);
  m.state["updates"] = 100;
  m.sharding = {{"world_size", 1},
                {"tensors",
                 {{"h.0.ln_2.bias",
                   {{"dtype", "F32"},
                    {"shape", {16}},
                    {"pieces",
                     {{{"rank", 0},
                       {"file", "rank_00000.safetensors"},
                       {"key", "h.0.ln_2.bias"},
                       {"flat", false},
                       {"start", {0}},
                       {"count", {16}}}}}}}}}};
  return m;
}

TEST(ManifestSeal, RoundTripsAndIsValidJson) {
  const Manifest m = sample_manifest();
  const std::string text = sealed_manifest_text(m);
  bool unsealed = true;
  const Manifest back = parse_manifest_text(text, "m.json", &unsealed);
  EXPECT_FALSE(unsealed);
  EXPECT_EQ(back.to_json(), m.to_json());
  // Any JSON reader (jq, Python) reads it; the seal is one more member.
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_TRUE(j.at("manifest_crc32").is_string());
  EXPECT_EQ(j.at("step"), 100);
}

TEST(ManifestSeal, EverySingleBitFlipIsRejected) {
  const std::string text = sealed_manifest_text(sample_manifest());
  int accepted = 0;
  for (size_t byte = 0; byte < text.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = text;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      try {
        parse_manifest_text(bad, "m.json");
        ++accepted;
        ADD_FAILURE() << "flip of bit " << bit << " of byte " << byte << " ('" << text[byte]
                      << "') was accepted";
      } catch (const CheckpointError&) {
      }
    }
    if (accepted > 3) break;  // enough to show the defect
  }
  EXPECT_EQ(accepted, 0);
}

TEST(ManifestSeal, EveryTruncationIsRejected) {
  const std::string text = sealed_manifest_text(sample_manifest());
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_THROW(parse_manifest_text(text.substr(0, n), "m.json"), CheckpointError) << n;
  }
}

TEST(ManifestSeal, ErrorNamesTheFileAndTheChecksums) {
  std::string text = sealed_manifest_text(sample_manifest());
  const size_t at = text.find("\"updates\": 100");
  ASSERT_NE(at, std::string::npos);
  text[at + 11] = '2';  // 100 -> 200
  try {
    parse_manifest_text(text, "/ckpt/step_00000100/manifest.json");
    FAIL() << "accepted";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/ckpt/step_00000100/manifest.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
}

// Manifests written before the seal (formats 1 and 2: the JSON alone) still open; a format-3
// manifest without its seal is refused, whatever else it says.
TEST(ManifestSeal, UnsealedLegacyFormatsAreReadAndFormat3IsNot) {
  Manifest m = sample_manifest();
  m.format_version = kLegacyShardedFormatVersion;
  bool unsealed = false;
  const Manifest back = parse_manifest_text(m.to_json().dump(2) + "\n", "m.json", &unsealed);
  EXPECT_TRUE(unsealed);
  EXPECT_EQ(back.step, 100);

  m.format_version = kShardedCheckpointFormatVersion;
  EXPECT_THROW(parse_manifest_text(m.to_json().dump(2) + "\n", "m.json"), CheckpointError);
}

TEST(LatestFile, NamesItsFolderAndRejectsEverySingleBitFlip) {
  const std::string text = latest_file_text(200);
  EXPECT_EQ(text.substr(0, text.find('\n')), "step_00000200");  // `head -1 latest` still works
  EXPECT_EQ(parse_latest_file_text(text), "step_00000200");
  for (size_t byte = 0; byte < text.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = text;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      EXPECT_EQ(parse_latest_file_text(bad), std::nullopt) << "bit " << bit << " of byte " << byte;
    }
  }
  // Written before the CRC: the bare name (with or without its newline).
  EXPECT_EQ(parse_latest_file_text("step_00000200\n"), "step_00000200");
  EXPECT_EQ(parse_latest_file_text("step_00000200"), "step_00000200");
  EXPECT_EQ(parse_latest_file_text("../../etc\n"), std::nullopt);
}

}  // namespace
}  // namespace brigade
