// The trainer's sharded checkpoints (train/checkpointing.h) end to end through `brigade launch`:
// every rank writes its own shard, and a run resumes on another number of ranks, reading only
// the regions it needs, with the state of the run that never stopped.
//
// Global batch 16 throughout: 2 ranks x 8 or 4 ranks x 4. Tolerance as in
// parallel/dp_run_helpers.h: losses and weights within 1e-5, optimizer state within 1e-3 of
// each vector's largest value (4 ranks reduce in another order than 2).
//
// Data order: the examples a run trains on come from the sampler state the checkpoint holds;
// the test replays, with an independent Sampler, what each rank of each phase consumed and
// requires every epoch of the stream to be a permutation of the dataset (nothing repeated,
// nothing skipped across the resume).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/data/sampler.h"
#include "common/checkpoint_tensors.h"
#include "parallel/dp_run_helpers.h"

namespace brigade::testing {
namespace {

class ShardedResume : public DpRuns {
 protected:
  static nlohmann::json manifest(const std::string& ckpt) {
    return nlohmann::json::parse(read_file(ckpt + "/manifest.json"));
  }

  // The checkpoint was saved by `ranks` ranks, of which the first `writers` wrote a shard
  // (under DDP every piece is replicated, so rank 0 writes them all).
  static void expect_sharded(const std::string& ckpt, int ranks, int writers) {
    const nlohmann::json m = manifest(ckpt);
    EXPECT_EQ(m.at("format_version"), kShardedCheckpointFormatVersion);
    EXPECT_EQ(m.at("sharding").at("world_size"), ranks);
    EXPECT_EQ(m.at("files").size(), static_cast<size_t>(writers)) << m.at("files").dump();
    for (int r = 0; r < writers; ++r) {
      const std::string file = shard_file_name(r);
      EXPECT_TRUE(m.at("files").contains(file)) << ckpt << " lacks " << file;
    }
  }

  // Every example id the ranks consumed, in stream order: phase 1 ran steps [0, saved) on
  // dp1 ranks of micro-batch mb1, phase 2 resumed where the checkpoint's sampler state says,
  // on dp2 ranks of mb2, up to step 20.
  static void expect_each_example_once_per_epoch(const std::string& ckpt, int dp1, int64_t mb1,
                                                 int dp2, int64_t mb2) {
    const SamplerState saved = manifest(ckpt).at("state").at("sampler").get<SamplerState>();
    ASSERT_EQ(saved.steps_consumed, 10);
    ASSERT_EQ(saved.global_batch, 16);
    auto sampler = [&](int dp, int64_t mb, int rank) {
      return Sampler(SamplerOptions{.num_examples = saved.num_examples,
                                    .seed = saved.seed,
                                    .micro_batch = mb,
                                    .dp_size = dp,
                                    .dp_rank = rank});
    };
    const int64_t resume_at = sampler(dp2, mb2, 0).resume_step(saved);
    EXPECT_EQ(resume_at, 10);
    std::vector<int64_t> stream;
    auto consume = [&](int dp, int64_t mb, int64_t from, int64_t to) {
      std::vector<int64_t> ids(static_cast<size_t>(mb));
      for (int64_t step = from; step < to; ++step) {
        for (int r = 0; r < dp; ++r) {  // (micro-step, rank) order = stream order
          sampler(dp, mb, r).micro_batch_examples(step, 0, ids.data());
          stream.insert(stream.end(), ids.begin(), ids.end());
        }
      }
    };
    consume(dp1, mb1, 0, saved.steps_consumed);
    consume(dp2, mb2, resume_at, 20);
    ASSERT_EQ(stream.size(), 320u);
    const auto n = static_cast<size_t>(saved.num_examples);
    for (size_t begin = 0; begin < stream.size(); begin += n) {
      const size_t end = std::min(stream.size(), begin + n);
      const std::set<int64_t> epoch(stream.begin() + static_cast<std::ptrdiff_t>(begin),
                                    stream.begin() + static_cast<std::ptrdiff_t>(end));
      EXPECT_EQ(epoch.size(), end - begin) << "an example repeats in the epoch from " << begin;
      EXPECT_GE(*epoch.begin(), 0);
      EXPECT_LT(*epoch.rbegin(), saved.num_examples);
    }
  }
};

// ZeRO-1 on 4 ranks (each writes its quarter of the optimizer state), then DDP on 2 (each
// reads all of it).
TEST_F(ShardedResume, FourRanksResumeOnTwo) {
  const std::string uninterrupted = run("dp2", 2, "");
  const std::string resumed = run(
      "dp4-then-dp2", 4, "--set parallel.zero=1 --set train.micro_batch=4 --set run.stop_after=10");
  ASSERT_EQ(losses(resumed).size(), 10u);
  expect_sharded(resumed + "/checkpoints/step_00000010", 4, 4);
  run("dp4-then-dp2", 2, "");
  expect_same_training(uninterrupted, resumed, /*state_tol=*/1e-3, /*same_eval=*/true);
  expect_each_example_once_per_epoch(resumed + "/checkpoints/step_00000010", 4, 4, 2, 8);
}

TEST_F(ShardedResume, TwoRanksResumeOnFour) {
  const std::string uninterrupted = run("dp2", 2, "");
  const std::string resumed = run("dp2-then-dp4", 2, "--set run.stop_after=10");
  expect_sharded(resumed + "/checkpoints/step_00000010", 2, 1);
  run("dp2-then-dp4", 4, "--set train.micro_batch=4");
  expect_same_training(uninterrupted, resumed, /*state_tol=*/1e-3, /*same_eval=*/false);
  expect_each_example_once_per_epoch(resumed + "/checkpoints/step_00000010", 2, 8, 4, 4);
}

// ZeRO-1 on 2 ranks, so that both write a shard. A bit flipped in rank 1's shard of the newest
// checkpoint: every rank rejects it with the
// same message naming the file, and all resume from the previous one, ending where the run
// that never stopped ends (same layout: bitwise in practice; the bound is the usual 1e-5).
TEST_F(ShardedResume, CorruptShardFallsBackToThePreviousCheckpoint) {
  const std::string z1 = "--set parallel.zero=1 --set train.ckpt_every=5";
  const std::string uninterrupted = run("dp2", 2, z1);
  const std::string resumed = run("corrupt", 2, z1 + " --set run.stop_after=10");
  const std::string shard = resumed + "/checkpoints/step_00000010/rank_00001.safetensors";
  std::string bytes = read_file(shard);
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() - 7] ^= 0x10;
  { std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes; }
  const std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config_ +
                          " --set run.out_dir=" + dir_ + "/corrupt " + z1;
  const auto r = run_command(cmd, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step_00000010/rank_00001.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + resumed + "/checkpoints/step_00000005"),
            std::string::npos)
      << r.output;
  // Steps 6-10 ran twice, so compare the final checkpoints rather than the metrics.
  const std::string last = "/checkpoints/step_00000020";
  expect_same_file(uninterrupted + last, resumed + last, "model.safetensors", false);
  expect_same_file(uninterrupted + last, resumed + last, "optimizer.safetensors", true);
}

}  // namespace
}  // namespace brigade::testing
