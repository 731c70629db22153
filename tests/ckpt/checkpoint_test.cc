#include "brigade/ckpt/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "ckpt/checkpoint_test_util.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string contains_all(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(Checkpoint, CommitThenOpenLatestReturnsIt) {
  TempDir root;
  const std::string dir = testing::save_fake(root.path(), 10);
  EXPECT_EQ(dir, root / "step_00000010");
  EXPECT_EQ(testing::list_dir(root.path()), (std::vector<std::string>{"latest", "step_00000010"}));
  // The folder's name, then its CRC-32 (zlib as the reference).
  const std::string name = "step_00000010";
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08lx",
                ::crc32(0, reinterpret_cast<const Bytef*>(name.data()), name.size()));
  EXPECT_EQ(testing::read_raw(root / "latest"), name + "\ncrc32 0x" + crc + "\n");
  EXPECT_EQ(testing::list_dir(dir),
            (std::vector<std::string>{"manifest.json", "model.safetensors", "optim.safetensors"}));

  std::vector<std::string> rejections;
  auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(rejections.empty()) << contains_all(rejections);
  EXPECT_EQ(r->dir(), dir);
  testing::expect_holds_step(*r, 10);
  EXPECT_EQ(r->find_tensor("adam.v"), "optim.safetensors");
  EXPECT_EQ(r->find_tensor("nope"), std::nullopt);
}

// The manifest checked against the format description, with zlib and stat as references.
TEST(Checkpoint, ManifestRecordsSizesAndCrcs) {
  TempDir root;
  const std::string dir = testing::save_fake(root.path(), 3);
  const nlohmann::json m = nlohmann::json::parse(testing::read_raw(dir + "/manifest.json"));
  EXPECT_EQ(m.at("format_version"), 1);
  EXPECT_EQ(m.at("step"), 3);
  EXPECT_EQ(m.at("state"), testing::fake_state(3));
  ASSERT_EQ(m.at("files").size(), 2u);
  for (const auto& [name, entry] : m.at("files").items()) {
    const std::string bytes = testing::read_raw(dir + "/" + name);
    EXPECT_EQ(entry.at("bytes").get<int64_t>(), static_cast<int64_t>(bytes.size())) << name;
    const uLong crc =
        ::crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
    EXPECT_EQ(entry.at("crc32").get<uint64_t>(), crc) << name;
  }
}

TEST(Checkpoint, MissingOrEmptyRootHasNoCheckpoint) {
  TempDir root;
  EXPECT_FALSE(CheckpointReader::open_latest_valid(root / "absent").has_value());
  EXPECT_FALSE(CheckpointReader::open_latest_valid(root.path()).has_value());
}

TEST(Checkpoint, KeepLastDeletesOlderCheckpoints) {
  TempDir root;
  for (int64_t step = 1; step <= 5; ++step) testing::save_fake(root.path(), step, /*keep_last=*/2);
  EXPECT_EQ(testing::list_dir(root.path()),
            (std::vector<std::string>{"latest", "step_00000004", "step_00000005"}));
  testing::expect_holds_step(CheckpointReader::open(root / "step_00000004"), 4);
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path()), 5);
}

TEST(Checkpoint, KeepLastZeroKeepsAll) {
  TempDir root;
  for (int64_t step = 1; step <= 4; ++step) testing::save_fake(root.path(), step, 0);
  EXPECT_EQ(testing::list_dir(root.path()).size(), 5u);
}

// After a rollback, checkpoints newer than the one being saved are never deleted.
TEST(Checkpoint, RetentionLeavesNewerFoldersAlone) {
  TempDir root;
  for (int64_t step : {1, 2, 5}) testing::save_fake(root.path(), step, 0);
  testing::save_fake(root.path(), 3, /*keep_last=*/1);
  EXPECT_EQ(testing::list_dir(root.path()),
            (std::vector<std::string>{"latest", "step_00000003", "step_00000005"}));
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path()), 3);
}

TEST(Checkpoint, FlippedBitRejectsCheckpointAndFallsBack) {
  for (int64_t offset : {int64_t{-1}, int64_t{20}}) {  // in the data, in the header
    SCOPED_TRACE(offset);
    TempDir root;
    testing::save_fake(root.path(), 1);
    testing::save_fake(root.path(), 2);
    const std::string bad = root / "step_00000002/optim.safetensors";
    testing::flip_bit(bad, offset, 3);

    std::vector<std::string> rejections;
    auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
    ASSERT_TRUE(r.has_value());
    testing::expect_holds_step(*r, 1);
    ASSERT_EQ(rejections.size(), 1u);
    EXPECT_NE(rejections[0].find(bad), std::string::npos) << rejections[0];
    EXPECT_NE(rejections[0].find("crc32"), std::string::npos) << rejections[0];
    EXPECT_THROW_WITH(CheckpointReader::open(root / "step_00000002"), CheckpointError, bad,
                      "corrupt");
  }
}

TEST(Checkpoint, TruncatedFileRejectsCheckpoint) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  testing::save_fake(root.path(), 2);
  const std::string bad = root / "step_00000002/model.safetensors";
  ASSERT_EQ(::truncate(bad.c_str(), static_cast<off_t>(fs::file_size(bad) - 4)), 0);
  std::vector<std::string> rejections;
  auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
  ASSERT_TRUE(r.has_value());
  testing::expect_holds_step(*r, 1);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_NE(rejections[0].find(bad), std::string::npos) << rejections[0];
  EXPECT_NE(rejections[0].find("truncated"), std::string::npos) << rejections[0];
}

TEST(Checkpoint, BrokenManifestsAndMissingFilesAreRejected) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  const std::string dir = testing::save_fake(root.path(), 2);
  const std::string manifest = dir + "/manifest.json";
  const std::string original = testing::read_raw(manifest);

  testing::write_raw(manifest, original.substr(0, original.size() / 2));
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "JSON");
  testing::write_raw(manifest, "[]");
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "not a JSON object");
  nlohmann::json j = nlohmann::json::parse(original);
  j["format_version"] = 99;
  testing::write_raw(manifest, j.dump());
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "format_version 99");
  j = nlohmann::json::parse(original);
  j["step"] = 7;
  testing::write_raw(manifest, j.dump());
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "does not match");
  j = nlohmann::json::parse(original);
  j["files"]["../escape"] = {{"bytes", 1}, {"crc32", 0}};
  testing::write_raw(manifest, j.dump());
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "../escape");
  j = nlohmann::json::parse(original);
  j["files"]["model.safetensors"]["crc32"] = -1;
  testing::write_raw(manifest, j.dump());
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest, "crc32");

  testing::write_raw(manifest, original);
  fs::remove(dir + "/model.safetensors");
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, dir + "/model.safetensors",
                    "No such file");
  fs::remove(manifest);
  EXPECT_THROW_WITH(CheckpointReader::open(dir), CheckpointError, manifest);

  std::vector<std::string> rejections;
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path(), &rejections), 1);
  EXPECT_EQ(rejections.size(), 1u) << contains_all(rejections);
}

TEST(Checkpoint, BadLatestFallsBackToNewestFolder) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  testing::save_fake(root.path(), 2);
  testing::write_raw(root / "latest", "../../etc\n");
  std::vector<std::string> rejections;
  auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
  ASSERT_TRUE(r.has_value());
  testing::expect_holds_step(*r, 2);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_NE(rejections[0].find(root / "latest"), std::string::npos) << rejections[0];

  fs::remove(root / "latest");  // e.g. a crash between the rename and writing `latest`
  rejections.clear();
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path(), &rejections), 2);
  EXPECT_TRUE(rejections.empty());
}

// A save interrupted before the rename leaves step_N.tmp: never read, removed by the next commit.
TEST(Checkpoint, LeftoverStagingFolderIsIgnoredAndCleaned) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  {
    const auto ts = testing::fake_tensors(2);
    CheckpointWriter crashed(root.path(), 2);
    crashed.add_file("model.safetensors", {{ts[0].name, ts[0].shape, ts[0].values.data()}});
    // Even a complete-looking manifest in the staging folder must not be trusted.
    write_file_durable(crashed.staging_dir() + "/manifest.json",
                       Manifest{.step = 2, .files = {}, .state = {}}.to_json().dump());
  }  // destroyed without commit
  ASSERT_TRUE(fs::exists(root / "step_00000002.tmp"));
  std::vector<std::string> rejections;
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path(), &rejections), 1);
  EXPECT_TRUE(rejections.empty()) << contains_all(rejections);

  testing::save_fake(root.path(), 3);
  EXPECT_EQ(testing::list_dir(root.path()),
            (std::vector<std::string>{"latest", "step_00000001", "step_00000003"}));
}

// A later step's staging folder may belong to an in-flight async save: left alone.
TEST(Checkpoint, NewerStagingFolderIsNotRemoved) {
  TempDir root;
  fs::create_directories(root / "step_00000009.tmp");
  testing::save_fake(root.path(), 4);
  EXPECT_TRUE(fs::exists(root / "step_00000009.tmp"));
}

// Rolled back to step 1 (step 2 is corrupt), the run reaches step 2 again and saves over it.
TEST(Checkpoint, ResavingAStepReplacesTheOldFolder) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  testing::save_fake(root.path(), 2);
  testing::flip_bit(root / "step_00000002/model.safetensors", -1);
  ASSERT_EQ(CheckpointReader::open_latest_valid(root.path())->step(), 1);

  const auto ts = testing::fake_tensors(7);  // different values than the first step 2
  CheckpointWriter w(root.path(), 2);
  w.add_file("model.safetensors", {{ts[0].name, ts[0].shape, ts[0].values.data()}});
  w.commit({{"again", true}});
  EXPECT_EQ(testing::list_dir(root.path()),
            (std::vector<std::string>{"latest", "step_00000001", "step_00000002"}));
  std::vector<std::string> rejections;
  auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
  EXPECT_TRUE(rejections.empty()) << contains_all(rejections);
  ASSERT_EQ(r->step(), 2);
  EXPECT_EQ(r->state(), (nlohmann::json{{"again", true}}));
  std::vector<float> out(ts[0].values.size());
  r->read("model.safetensors", ts[0].name, out.data(), ts[0].shape);
  EXPECT_EQ(out, ts[0].values);
}

TEST(Checkpoint, ReadChecksShapeAndFile) {
  TempDir root;
  const std::string dir = testing::save_fake(root.path(), 1);
  auto r = CheckpointReader::open(dir);
  std::vector<float> out(2000);
  EXPECT_THROW_WITH(r.read("model.safetensors", "wte.weight", out.data(), {16, 50}),
                    CheckpointError, dir + "/model.safetensors", "(50, 16)", "(16, 50)");
  EXPECT_THROW_WITH(r.read("model.safetensors", "adam.m", out.data(), {1920}), CheckpointError,
                    "adam.m");
  EXPECT_THROW_WITH(r.read("other.safetensors", "x", out.data(), {1}), CheckpointError,
                    "other.safetensors", "not in the manifest");
}

// Files written by someone else into the staging folder (another rank, a background thread).
TEST(Checkpoint, RecordedFilesAreCommittedAndVerified) {
  TempDir root;
  const std::vector<float> shard = {1, 2, 3, 4};
  CheckpointWriter w(root.path(), 5);
  const std::vector<StTensorView> views = {{.name = "flat[0:4]",
                                            .dtype = StDtype::kF32,
                                            .shape = {4},
                                            .data = shard.data(),
                                            .nbytes = 16}};
  const FileDigest d = write_safetensors(w.staging_dir() + "/rank_1.safetensors", views);
  w.add_file_record("rank_1.safetensors", d);
  w.add_file_record("rank_2.bin", FileDigest{.bytes = 0, .crc32 = 0});
  write_file_durable(w.staging_dir() + "/rank_2.bin", "");
  w.commit({});
  auto r = CheckpointReader::open(root / "step_00000005");
  std::vector<float> out(4);
  r.read("rank_1.safetensors", "flat[0:4]", out.data(), {4});
  EXPECT_EQ(out, shard);

  CheckpointWriter lying(root.path(), 6);
  write_safetensors(lying.staging_dir() + "/rank_1.safetensors", views);
  lying.add_file_record("rank_1.safetensors", FileDigest{.bytes = d.bytes, .crc32 = d.crc32 ^ 1});
  lying.commit({});
  EXPECT_THROW_WITH(CheckpointReader::open(root / "step_00000006"), CheckpointError,
                    "rank_1.safetensors", "crc32");
  EXPECT_EQ(CheckpointReader::open_latest_valid(root.path())->step(), 5);
}

TEST(Checkpoint, StepNamesAreCanonical) {
  EXPECT_EQ(step_dir_name(0), "step_00000000");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(parse_step_dir_name("step_00000100"), 100);
  EXPECT_EQ(parse_step_dir_name("step_123456789"), 123456789);
  EXPECT_EQ(parse_step_dir_name("step_100"), std::nullopt);
  EXPECT_EQ(parse_step_dir_name("step_00000100.tmp"), std::nullopt);
  EXPECT_EQ(parse_step_dir_name("step_-0000001"), std::nullopt);
  EXPECT_EQ(parse_step_tmp_name("step_00000100.tmp"), 100);
  EXPECT_EQ(parse_step_tmp_name("step_00000100.deleting.tmp"), 100);
  EXPECT_EQ(parse_step_tmp_name("latest.tmp"), std::nullopt);
  EXPECT_FALSE(is_checkpoint_file_name("a/b"));
  EXPECT_FALSE(is_checkpoint_file_name(".."));
  EXPECT_FALSE(is_checkpoint_file_name("manifest.json"));
  EXPECT_TRUE(is_checkpoint_file_name("rank_0003.safetensors"));
}

}  // namespace
}  // namespace brigade
