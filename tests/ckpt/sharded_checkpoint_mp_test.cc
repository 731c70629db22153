// Sharded checkpoints across real processes: 4 ranks save (column boxes, replicated pieces,
// flat ranges that cut rows, a scalar), then 1, 2 and 3 ranks load every tensor whole, in
// their own flat split and in odd boxes, and compare with the closed-form reference. Async
// saves overlap training collectives on another communicator, snapshot the caller's buffers,
// and report injected disk failures without harming the previous checkpoint.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/ckpt/async_save.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/ckpt/sharded_save.h"
#include "ckpt/sharded_test_util.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using detail::IoFault;
using detail::IoOp;
using testutil::make_file_comm;
using testutil::run_ranks;
using testutil::TempDir;
using namespace std::chrono_literals;

const nlohmann::json kMesh = {{"pp", 1}, {"dp", 2}, {"ep", 1}, {"tp", 2}};

nlohmann::json state_of(int64_t step) {
  return {{"step", step}, {"sampler", {{"position", 1000 + step}}}, {"config", {{"lr", 3e-4}}}};
}

// This rank's piece buffers for `step`, filled from the reference.
struct RankData {
  std::vector<std::vector<float>> buffers;
  std::vector<const void*> ptrs;
};

RankData rank_data(const std::vector<ShardPiece>& pieces, int64_t step) {
  RankData d;
  for (const ShardPiece& p : pieces) {
    d.buffers.push_back(testing::ref_region(p.tensor, p.shape, p.region, step));
  }
  for (const auto& b : d.buffers) d.ptrs.push_back(b.data());
  return d;
}

// Reads the regions rank `rank` of `size` would load, and compares with the reference.
void expect_loads(const ShardedCheckpointReader& reader, int rank, int size, int64_t step) {
  EXPECT_EQ(reader.step(), step);
  EXPECT_EQ(reader.state(), state_of(step));
  EXPECT_EQ(reader.saved_world_size(), 4);
  EXPECT_EQ(reader.index().mesh, kMesh);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(reader.rank_state(r), nlohmann::json({{"rng", r * 11}}));
  for (const testing::TestTensor& t : testing::test_tensors()) {
    const int64_t n = testing::numel_of(t.shape);
    std::vector<Region> regions = {Region::whole(t.shape),  // ZeRO-3 / TP -> DDP
                                   Region::range(n * rank / size, n * (rank + 1) / size)};
    if (t.shape.size() >= 2) {  // an odd box: rows from `rank`, columns 1..end-1
      std::vector<int64_t> start(t.shape.size(), 0), count = t.shape;
      start[0] = rank % t.shape[0];
      count[0] = t.shape[0] - start[0];
      start.back() = 1;
      count.back() = t.shape.back() - 2;
      regions.push_back(Region::box(start, count));
    }
    for (const Region& region : regions) {
      std::vector<float> got(static_cast<size_t>(region.numel()), -1.0f);
      reader.read_f32(t.name, region, got.data(), region.numel());
      EXPECT_EQ(got, testing::ref_region(t.name, t.shape, region, step))
          << t.name << " " << region.to_string() << " on rank " << rank << " of " << size;
    }
  }
}

// Saves `steps` with 4 ranks through the blocking saver.
void save_with_four(const std::string& root, const std::vector<int64_t>& steps) {
  TempDir store;
  auto result = run_ranks(4, 60s, [&](int rank) {
    auto comm = make_file_comm(store.path(), rank, 4);
    ShardedCheckpointSaver saver(root, *comm, testing::test_pieces(rank), kMesh,
                                 CheckpointOptions{.keep_last = 3});
    for (int64_t step : steps) {
      const RankData d = rank_data(saver.plan().pieces(), step);
      const SaveResult r = saver.save(step, d.ptrs, state_of(step), {{"rng", rank * 11}});
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.dir, root + "/" + step_dir_name(step));
    }
  });
  ASSERT_TRUE(testutil::AllRanksOk(result));
}

TEST(ShardedCheckpoint, SavedByFourLoadsIntoOneTwoAndThree) {
  TempDir root;
  save_with_four(root.path(), {5});
  // Every rank holds something of its own (a row of emb, flat ranges), so each wrote a file;
  // the small replicated pieces were written once (h.0.ln.b by rank 0, each h.0.mlp.w half by
  // the lower of its two holders), the large one (dense.w, 1.09 MB) in a block per rank.
  const auto files = std::filesystem::directory_iterator(root.path() + "/step_00000005");
  int n_files = 0;
  for (const auto& f : files) n_files += f.path().extension() == ".safetensors";
  EXPECT_EQ(n_files, 4);
  {
    const ShardedCheckpointReader r = ShardedCheckpointReader::open(root.path() + "/step_00000005");
    EXPECT_EQ(r.tensor("h.0.ln.b").pieces.size(), 1u);
    EXPECT_EQ(r.tensor("h.0.mlp.w").pieces.size(), 2u);
    const auto& dense = r.tensor("dense.w").pieces;
    ASSERT_EQ(dense.size(), 4u);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(dense[k].rank, k);
      EXPECT_EQ(dense[k].region,
                Region::box({13 * k / 4, 0, 0}, {13 * (k + 1) / 4 - 13 * k / 4, 100, 210}));
    }
    EXPECT_EQ(r.manifest().format_version, kShardedCheckpointFormatVersion);
  }
  for (int size : {1, 2, 3}) {
    SCOPED_TRACE("load with " + std::to_string(size) + " ranks");
    TempDir store;
    auto result = run_ranks(size, 60s, [&](int rank) {
      auto comm = make_file_comm(store.path(), rank, size);
      std::vector<std::string> rejections;
      auto reader =
          ShardedCheckpointReader::open_latest_valid(root.path(), comm.get(), &rejections);
      ASSERT_TRUE(reader.has_value());
      EXPECT_TRUE(rejections.empty());
      expect_loads(*reader, rank, size, 5);
    });
    EXPECT_TRUE(testutil::AllRanksOk(result));
  }
}

TEST(ShardedCheckpoint, KeepsTheLastKAndCleansStaging) {
  TempDir root;
  save_with_four(root.path(), {1, 2, 3, 4});
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(root.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step_00000002", "step_00000003",
                                             "step_00000004"}));
  const auto reader = ShardedCheckpointReader::open_latest_valid(root.path());
  ASSERT_TRUE(reader.has_value());
  expect_loads(*reader, 0, 1, 4);
}

// Two ranks, half of every tensor each (flat ranges), for the async tests.
std::vector<ShardPiece> half_pieces(int rank) {
  std::vector<ShardPiece> out;
  for (const testing::TestTensor& t : testing::test_tensors()) {
    const int64_t n = testing::numel_of(t.shape);
    out.push_back(
        {t.name, t.shape, StDtype::kF32, Region::range(n * rank / 2, n * (rank + 1) / 2)});
  }
  return out;
}

void expect_two_rank_checkpoint(const ShardedCheckpointReader& reader, int64_t step) {
  EXPECT_EQ(reader.step(), step);
  for (const testing::TestTensor& t : testing::test_tensors()) {
    const Region whole = Region::whole(t.shape);
    std::vector<float> got(static_cast<size_t>(whole.numel()));
    reader.read_f32(t.name, whole, got.data(), whole.numel());
    EXPECT_EQ(got, testing::ref_region(t.name, t.shape, whole, step)) << t.name;
  }
}

TEST(AsyncCheckpoint, SavesTheSnapshotWhileTrainingCollectivesRun) {
  TempDir root, store;
  auto result = run_ranks(2, 60s, [&](int rank) {
    auto world = make_file_comm(store.path(), rank, 2, 10000ms, "world");
    auto ckpt = make_file_comm(store.path(), rank, 2, 10000ms, "ckpt");
    AsyncCheckpointSaver saver(root.path(), *ckpt, half_pieces(rank), kMesh,
                               CheckpointOptions{.keep_last = 2});
    RankData d;
    std::atomic<bool> clobbered{false};
    // Runs on the saver's thread after save() returned and before it writes: if the saver
    // wrote from the caller's buffers instead of its snapshot, the file would hold -7s.
    saver.set_before_write_hook([&] {
      for (auto& b : d.buffers) std::fill(b.begin(), b.end(), -7.0f);
      clobbered = true;
    });
    for (int64_t step = 1; step <= 3; ++step) {
      d = rank_data(saver.plan().pieces(), step);
      clobbered = false;
      saver.save(step, d.ptrs, state_of(step), {{"rng", rank}});
      // "Training": all-reduces on the world communicator while the save is in flight.
      for (int i = 0; i < 20; ++i) {
        std::vector<float> x(1000, static_cast<float>(rank + i));
        world->all_reduce(x.data(), 1000, ReduceOp::kSum);
        ASSERT_EQ(x[999], static_cast<float>(2 * i + 1));
      }
      const auto r = saver.wait();
      ASSERT_TRUE(r.has_value());
      EXPECT_TRUE(r->ok) << r->error;
      EXPECT_EQ(r->step, step);
      EXPECT_TRUE(clobbered.load());
      EXPECT_FALSE(saver.poll().has_value());  // reported once
    }
    EXPECT_EQ(saver.snapshot_allocations(), 1);
    auto reader = ShardedCheckpointReader::open_latest_valid(root.path(), world.get());
    ASSERT_TRUE(reader.has_value());
    expect_two_rank_checkpoint(*reader, 3);
    EXPECT_FALSE(std::filesystem::exists(root.path() + "/step_00000001"));  // keep_last = 2
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

// A disk failure on one rank (its shard write) or on rank 0 (the commit's rename): the save
// is reported failed on every rank, the previous checkpoint stays `latest` and loads, and the
// next save succeeds.
struct FailureCase {
  const char* label;
  int failing_rank;
  IoOp op;
  const char* expected;
};

class AsyncFailure : public ::testing::TestWithParam<FailureCase> {};

TEST_P(AsyncFailure, IsReportedAndTheNextSaveSucceeds) {
  const FailureCase c = GetParam();
  TempDir root, store;
  auto result = run_ranks(2, 60s, [&](int rank) {
    auto world = make_file_comm(store.path(), rank, 2, 10000ms, "world");
    auto ckpt = make_file_comm(store.path(), rank, 2, 10000ms, "ckpt");
    AsyncCheckpointSaver saver(root.path(), *ckpt, half_pieces(rank), kMesh);
    RankData d = rank_data(saver.plan().pieces(), 1);
    saver.save(1, d.ptrs, state_of(1));
    auto r = saver.wait();
    ASSERT_TRUE(r && r->ok) << (r ? r->error : "no result");

    d = rank_data(saver.plan().pieces(), 2);
    if (rank == c.failing_rank) detail::set_io_fault(IoFault{.op = c.op, .nth = 1});
    saver.save(2, d.ptrs, state_of(2));
    r = saver.wait();
    detail::set_io_fault(std::nullopt);
    ASSERT_TRUE(r.has_value());
    EXPECT_FALSE(r->ok);
    EXPECT_NE(r->error.find("rank " + std::to_string(c.failing_rank)), std::string::npos)
        << r->error;
    EXPECT_NE(r->error.find(c.expected), std::string::npos) << r->error;
    EXPECT_NE(r->error.find("step 2"), std::string::npos) << r->error;

    std::vector<std::string> rejections;
    auto reader = ShardedCheckpointReader::open_latest_valid(root.path(), world.get(), &rejections);
    ASSERT_TRUE(reader.has_value());
    EXPECT_TRUE(rejections.empty());
    expect_two_rank_checkpoint(*reader, 1);

    d = rank_data(saver.plan().pieces(), 3);
    saver.save(3, d.ptrs, state_of(3));
    r = saver.wait();
    ASSERT_TRUE(r && r->ok) << (r ? r->error : "no result");
    world->barrier();
    reader = ShardedCheckpointReader::open_latest_valid(root.path(), world.get());
    ASSERT_TRUE(reader.has_value());
    expect_two_rank_checkpoint(*reader, 3);
    EXPECT_FALSE(std::filesystem::exists(root.path() + "/step_00000002.tmp"));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AsyncFailure,
    ::testing::Values(FailureCase{"shard_write_enospc", 1, IoOp::kWrite, "No space left on device"},
                      FailureCase{"commit_rename", 0, IoOp::kRename, "cannot rename"}),
    [](const auto& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace brigade
