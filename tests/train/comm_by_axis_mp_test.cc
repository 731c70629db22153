// Communication per step by mesh axis and operation (monitor/comm_by_axis.h), in the metrics of
// real multi-process runs, against byte counts worked out by hand from the tiny GPT's shapes
// (vocab 256, context 32, width 32, 2 layers, wte tied to the head):
//   P = 256*32 + 32*32 + 2*(2*2*32 + 32*96+96 + 32*32+32 + 32*128+128 + 128*32+32) + 2*32
//     = 34688 parameters.
// - DDP on 2 ranks: the ring all-reduce sends exactly T of a T-byte buffer when N = 2 (each rank
//   sends the one chunk the other owns, twice: reduce-scatter and all-gather of half each), so
//   dp/all_reduce is the 4P bytes of gradients plus the step's few scalars.
// - pp = 2 on 2 ranks, 4 micro-batches of 2 sequences: stage 0 (rank 0) sends each micro-batch's
//   activations, 2 x 32 x 32 floats, and receives their gradients of the same size; the tied wte
//   gradient (256 x 32 floats) is all-reduced between the first and last stage.
// - tp = 2: only the tp group (and the world's monitoring exchange) moves bytes.
// Every record's pairs sum to its comm_sent_bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

constexpr int64_t kParams = 34688;
constexpr int64_t kActivationBytes = 2 * 32 * 32 * 4;  // one micro-batch of 2 sequences
constexpr int64_t kWteBytes = 256 * 32 * 4;

class CommByAxisRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("comm_by_axis");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", "3"}, {"train.micro_batch", "2"}, {"train.grad_accum", "4"}});
  }
  // The train records of rank 0 of a 2-rank run.
  std::vector<nlohmann::json> run(const std::string& name, const std::string& extra) {
    const std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 2 -- train " + config_ +
                            " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
    const auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    auto out = testing::metrics_records(dir_ + "/" + name + "/tiny/metrics.jsonl", "train");
    EXPECT_EQ(out.size(), 3u);
    return out;
  }
  // The pairs of one record sum to its totals, sent and received.
  static void expect_sums(const nlohmann::json& r) {
    for (const auto& [by, total] : {std::pair{"comm_sent_by", "comm_sent_bytes"},
                                    std::pair{"comm_recv_by", "comm_recv_bytes"}}) {
      ASSERT_TRUE(r.contains(by)) << r.dump();
      int64_t sum = 0;
      for (const auto& [key, v] : r[by].items()) sum += v.get<int64_t>();
      EXPECT_EQ(sum, r[total].get<int64_t>()) << by << " in " << r.dump();
    }
  }
  static int64_t sent(const nlohmann::json& r, const std::string& key) {
    return r["comm_sent_by"].value(key, int64_t{0});
  }
  static int64_t received(const nlohmann::json& r, const std::string& key) {
    return r["comm_recv_by"].value(key, int64_t{0});
  }

  std::string dir_, config_;
};

TEST_F(CommByAxisRuns, DataParallelGradientsAreTheAllReduceOnDp) {
  for (const auto& r : run("ddp", "")) {
    expect_sums(r);
    const int64_t grads = sent(r, "dp/all_reduce");
    EXPECT_GE(grads, 4 * kParams) << r.dump();
    EXPECT_LE(grads, 4 * kParams + 64) << "more than the gradients and a few scalars: " << r.dump();
    for (const auto& [key, v] : r["comm_sent_by"].items()) {
      EXPECT_EQ(key.rfind("dp/", 0), 0u) << key << ": one process group, the dp axis";
    }
  }
}

TEST_F(CommByAxisRuns, PipelineSendsActivationsAndAllReducesTheTiedEmbedding) {
  for (const auto& r : run("pp", "--set parallel.pp=2")) {
    expect_sums(r);
    EXPECT_EQ(sent(r, "pp/send"), 4 * kActivationBytes) << r.dump();
    EXPECT_EQ(received(r, "pp/recv"), 4 * kActivationBytes) << r.dump();
    EXPECT_EQ(sent(r, "embedding/all_reduce"), kWteBytes) << r.dump();
    for (const auto& [key, v] : r["comm_sent_by"].items()) {
      EXPECT_TRUE(key.rfind("pp/", 0) == 0 || key.rfind("embedding/", 0) == 0 ||
                  key.rfind("world/", 0) == 0)
          << key << " moved bytes on an axis of extent 1";
    }
  }
}

TEST_F(CommByAxisRuns, TensorParallelTrafficIsOnTheTpAxis) {
  for (const auto& r : run("tp", "--set parallel.tp=2")) {
    expect_sums(r);
    // At least the 4 activation all-reduces per layer (2 forward, 2 backward) per micro-batch.
    EXPECT_GE(sent(r, "tp/all_reduce"), 4 * 2 * 4 * kActivationBytes) << r.dump();
    for (const auto& [key, v] : r["comm_sent_by"].items()) {
      EXPECT_TRUE(key.rfind("tp/", 0) == 0 || key.rfind("world/", 0) == 0)
          << key << " moved bytes on an axis of extent 1";
    }
  }
}

}  // namespace
}  // namespace brigade
