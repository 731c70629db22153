// The sharded reader in one process: it reads format-1 (whole-tensor) checkpoints region by
// region, and it rejects a manifest whose shard index does not add up, naming the problem.
#include "brigade/ckpt/sharded_reader.h"

#include <gtest/gtest.h>

#include <cstring>

#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint_validation.h"
#include "brigade/ckpt/sharded_save.h"
#include "brigade/comm/comm_factory.h"
#include "ckpt/checkpoint_test_util.h"
#include "ckpt/sharded_test_util.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using testing::TempDir;

TEST(ShardedReader, ReadsWholeTensorCheckpointsByRegion) {
  TempDir root;
  testing::save_fake(root.path(), 4);
  const auto reader = ShardedCheckpointReader::open_latest_valid(root.path());
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(reader->step(), 4);
  EXPECT_EQ(reader->saved_world_size(), 1);
  for (const testing::FakeTensor& t : testing::fake_tensors(4)) {
    // The second half of the flattening, and for matrices rows 1.. columns 2..
    const int64_t n = static_cast<int64_t>(t.values.size());
    std::vector<float> got(static_cast<size_t>(n - n / 2));
    reader->read_f32(t.name, Region::range(n / 2, n), got.data(), n - n / 2);
    EXPECT_EQ(0, std::memcmp(got.data(), t.values.data() + n / 2, got.size() * 4)) << t.name;
    if (t.shape.size() == 2) {
      const int64_t rows = t.shape[0] - 1, cols = t.shape[1] - 2;
      std::vector<float> box(static_cast<size_t>(rows * cols));
      reader->read_f32(t.name, Region::box({1, 2}, {rows, cols}), box.data(), rows * cols);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          ASSERT_EQ(box[i * cols + j], t.values[(i + 1) * t.shape[1] + j + 2]) << t.name;
        }
      }
    }
  }
}

// One process saving a sharded checkpoint (world of 1), then the manifest edited.
std::string save_single(const std::string& root) {
  CommOptions o;
  auto comm = create_communicator(o);
  std::vector<ShardPiece> pieces;
  std::vector<std::vector<float>> data;
  std::vector<const void*> ptrs;
  for (const testing::TestTensor& t : testing::test_tensors()) {
    pieces.push_back({t.name, t.shape, StDtype::kF32, Region::whole(t.shape)});
    data.push_back(testing::ref_region(t.name, t.shape, Region::whole(t.shape), 9));
  }
  for (const auto& d : data) ptrs.push_back(d.data());
  ShardedCheckpointSaver saver(root, *comm, pieces);
  const SaveResult r = saver.save(9, ptrs, {{"step", 9}});
  EXPECT_TRUE(r.ok) << r.error;
  return r.dir;
}

TEST(ShardedReader, OldReaderStillValidatesShardedCheckpoints) {
  TempDir root;
  const std::string dir = save_single(root.path());
  const CheckpointReader old = CheckpointReader::open(dir);  // verifies every file's CRC
  EXPECT_EQ(old.manifest().format_version, kShardedCheckpointFormatVersion);
  EXPECT_TRUE(old.manifest().files.count("rank_00000.safetensors"));
}

TEST(ShardedReader, RejectsAnIndexThatDoesNotAddUp) {
  TempDir root;
  const std::string dir = save_single(root.path());
  const std::string path = dir + "/manifest.json";
  const nlohmann::json good = nlohmann::json::parse(read_file(path));
  struct Edit {
    const char* expected;
    std::function<void(nlohmann::json&)> apply;
  };
  const std::vector<Edit> edits = {
      {"not in the manifest",
       [](nlohmann::json& j) {
         j["sharding"]["tensors"]["emb"]["pieces"][0]["file"] = "rank_00007.safetensors";
       }},
      {"in no piece",
       [](nlohmann::json& j) {
         j["sharding"]["tensors"]["w_flat"]["pieces"][0]["count"] = {6, 9};
       }},
      {"does not fit",
       [](nlohmann::json& j) {
         j["sharding"]["tensors"]["w_flat"]["pieces"][0]["start"] = {1, 0};
       }},
      {"contiguous runs",  // a box of one element per row of 2^25 rows: 512 MiB of runs
       [](nlohmann::json& j) {
         j["sharding"]["tensors"]["huge"] = {{"dtype", "F32"},
                                             {"shape", {int64_t{1} << 25, 2}},
                                             {"pieces",
                                              {{{"rank", 0},
                                                {"file", "rank_00000.safetensors"},
                                                {"key", "huge"},
                                                {"flat", false},
                                                {"start", {0, 0}},
                                                {"count", {int64_t{1} << 25, 1}}}}}};
       }},
      {"does not hold piece",
       [](nlohmann::json& j) { j["sharding"]["tensors"]["adam.m"]["pieces"][0]["key"] = "emb"; }},
  };
  for (const Edit& e : edits) {
    nlohmann::json j = good;
    e.apply(j);
    j.erase("manifest_crc32");  // sealed again, so that the index itself is what is checked
    write_file_atomic(path, sealed_manifest_text(Manifest::from_json(j, path)));
    try {
      const auto r = ShardedCheckpointReader::open(dir);
      std::vector<float> out(137);
      r.read_f32("adam.m", Region::whole({137}), out.data(), 137);  // opens the file lazily
      ADD_FAILURE() << "accepted: " << e.expected;
    } catch (const CheckpointError& err) {
      EXPECT_NE(std::string(err.what()).find(e.expected), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace brigade
