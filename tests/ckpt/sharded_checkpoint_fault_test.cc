// Sharded checkpoints under failure: a rank killed in the middle of a save, and a shard file
// with a flipped bit or cut short. Each time the previous complete checkpoint must be the one
// every rank loads, and a corrupt file must be named in the error.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "brigade/base/error.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/ckpt/sharded_save.h"
#include "ckpt/sharded_test_util.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade::sharded_checkpoint_fault_test {
namespace {

using testutil::make_file_comm;
using testutil::run_ranks;
using testutil::TempDir;
using namespace std::chrono_literals;

std::vector<const void*> pointers(const std::vector<std::vector<float>>& buffers) {
  std::vector<const void*> out;
  for (const auto& b : buffers) out.push_back(b.data());
  return out;
}

std::vector<std::vector<float>> buffers_of(const std::vector<ShardPiece>& pieces, int64_t step) {
  std::vector<std::vector<float>> out;
  for (const ShardPiece& p : pieces) {
    out.push_back(testing::ref_region(p.tensor, p.shape, p.region, step));
  }
  return out;
}

// Every tensor, read whole by each of `size` ranks, equals step's reference.
void expect_all_ranks_load(const std::string& root, int size, int64_t step,
                           const std::string& rejected_file) {
  TempDir store;
  auto result = run_ranks(size, 60s, [&](int rank) {
    auto comm = make_file_comm(store.path(), rank, size);
    std::vector<std::string> rejections;
    auto reader = ShardedCheckpointReader::open_latest_valid(root, comm.get(), &rejections);
    ASSERT_TRUE(reader.has_value());
    EXPECT_EQ(reader->step(), step);
    if (rejected_file.empty()) {
      EXPECT_TRUE(rejections.empty());
    } else {
      ASSERT_EQ(rejections.size(), 1u);
      EXPECT_NE(rejections[0].find(rejected_file), std::string::npos) << rejections[0];
    }
    for (const testing::TestTensor& t : testing::test_tensors()) {
      const Region whole = Region::whole(t.shape);
      std::vector<float> got(static_cast<size_t>(whole.numel()));
      reader->read_f32(t.name, whole, got.data(), whole.numel());
      EXPECT_EQ(got, testing::ref_region(t.name, t.shape, whole, step)) << t.name;
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

// Saves steps 1 and 2 with 4 ranks; rank `victim` dies during step 2 when victim >= 0.
void save_two_steps(const std::string& root, int victim) {
  TempDir store;
  auto result = run_ranks(4, 60s, [&](int rank) {
    auto comm = make_file_comm(store.path(), rank, 4, 5000ms);
    ShardedCheckpointSaver saver(root, *comm, testing::test_pieces(rank));
    for (int64_t step : {1, 2}) {
      const auto buffers = buffers_of(saver.plan().pieces(), step);
      if (step == 2 && rank == victim) {
        // Half a shard file, then death, as a machine failing mid-write.
        std::filesystem::create_directories(root + "/step_00000002.tmp");
        std::ofstream(root + "/step_00000002.tmp/" + shard_file_name(rank)) << "partial";
        ::raise(SIGKILL);
      }
      const SaveResult r = saver.save(step, pointers(buffers), {{"step", step}});
      if (step == 2 && victim >= 0) {
        EXPECT_FALSE(r.ok);
        EXPECT_NE(r.error.find("step 2"), std::string::npos) << r.error;
      } else {
        EXPECT_TRUE(r.ok) << r.error;
      }
    }
  });
  for (int r = 0; r < 4; ++r) {
    if (r == victim) {
      EXPECT_TRUE(result.of(r).killed_by(SIGKILL)) << result.describe();
    } else {
      EXPECT_TRUE(result.of(r).ok()) << result.describe();
    }
  }
}

TEST(ShardedCheckpointFault, RankKilledDuringSaveLeavesThePreviousCheckpoint) {
  TempDir root;
  save_two_steps(root.path(), 3);
  EXPECT_FALSE(std::filesystem::exists(root.path() + "/step_00000002"));
  expect_all_ranks_load(root.path(), 2, 1, "");
}

void flip_last_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(-1, std::ios::end);
  f.write(&c, 1);
}

TEST(ShardedCheckpointFault, FlippedBitIsNamedAndThePreviousCheckpointUsed) {
  TempDir root;
  save_two_steps(root.path(), -1);
  const std::string bad = root.path() + "/step_00000002/rank_00002.safetensors";
  flip_last_byte(bad);
  // Two loaders: the file is verified by rank 0 only, yet both reject step 2 and name it.
  expect_all_ranks_load(root.path(), 2, 1, "rank_00002.safetensors");
  EXPECT_THROW(ShardedCheckpointReader::open(root.path() + "/step_00000002"), CheckpointError);
  try {
    ShardedCheckpointReader::open(root.path() + "/step_00000002");
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
}

TEST(ShardedCheckpointFault, TruncatedShardIsNamedAndThePreviousCheckpointUsed) {
  TempDir root;
  save_two_steps(root.path(), -1);
  const std::string bad = root.path() + "/step_00000002/rank_00001.safetensors";
  std::filesystem::resize_file(bad, std::filesystem::file_size(bad) - 7);
  expect_all_ranks_load(root.path(), 3, 1, "rank_00001.safetensors");
  try {
    ShardedCheckpointReader::open(root.path() + "/step_00000002");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade::sharded_checkpoint_fault_test
