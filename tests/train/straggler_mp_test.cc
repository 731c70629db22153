// Straggler detection in the training loop, end to end through `brigade launch`: three ranks
// of a DDP job, one of them slowed by the test hook BRIGADE_FAULT_SLOW_RANK / _SLOW_MS (a sleep
// in each of its forwards, counted in its busy time as a slower machine's compute would be).
// Step 1 is warm-up (StragglerOptions::warmup_steps: one-time kernel and page costs differ between
// ranks by chance, measured up to 2x) and counts for nobody, so the metrics name that rank from
// step 4 on, the third counted slow step (StragglerOptions::consecutive); the log says so once, and
// the summary's mean busy time per rank shows the injected sleep. A run without the hook flags
// nobody. Three ranks, because with two the median is the mean of both and no rank's ratio can
// reach 2.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

constexpr int kSlowRank = 2;
constexpr int kSlowMs = 40;  // a tiny-GPT step computes in a few ms

class Stragglers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("straggler");
    config_ = dir_ + "/tiny.toml";
    std::ofstream(config_) << testing::tiny_gpt_config(
        {{"train.steps", "8"}, {"train.micro_batch", "2"}, {"comm.timeout_s", "60"}});
  }

  // Runs 3 ranks into <dir>/<name>; returns the records of metrics.jsonl.
  std::vector<nlohmann::json> run(const std::string& name, const std::string& env,
                                  const std::string& extra = "") {
    const std::string cmd = "env " + env + " " + BRIGADE_BINARY + " launch --nproc 3 -- train " +
                            config_ + " --set run.out_dir=" + dir_ + "/" + name + " " + extra;
    const auto r = run_command(cmd, 120);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    return testing::metrics_records(dir_ + "/" + name + "/tiny/metrics.jsonl");
  }
  std::string log_of(const std::string& name) const {
    return read_file(dir_ + "/" + name + "/tiny/train.log");
  }

  std::string dir_, config_;
};

TEST_F(Stragglers, SlowedRankIsNamed) {
  const auto records = run("slow", "BRIGADE_FAULT_SLOW_RANK=" + std::to_string(kSlowRank) +
                                       " BRIGADE_FAULT_SLOW_MS=" + std::to_string(kSlowMs));
  int steps = 0;
  for (const auto& r : records) {
    if (!r.contains("ms_per_step")) continue;
    ++steps;
    const int64_t step = r["step"].get<int64_t>();
    ASSERT_TRUE(r.contains("straggler_max_ratio")) << r.dump();
    if (step > 1) {
      EXPECT_GT(r["straggler_max_ratio"].get<double>(), 1.2) << r.dump();
    }
    if (step < 4) {
      EXPECT_FALSE(r.contains("straggler_rank")) << "flagged before 3 slow steps: " << r.dump();
    } else {
      ASSERT_TRUE(r.contains("straggler_rank")) << r.dump();
      EXPECT_EQ(r["straggler_rank"].get<int>(), kSlowRank) << r.dump();
    }
  }
  ASSERT_EQ(steps, 8);
  const nlohmann::json& summary = records.back();
  ASSERT_TRUE(summary.contains("busy_ms_per_rank")) << summary.dump();
  const auto busy = summary["busy_ms_per_rank"].get<std::vector<double>>();
  ASSERT_EQ(busy.size(), 3u);
  EXPECT_GE(busy[kSlowRank], kSlowMs);
  for (int r = 0; r < 3; ++r) {
    if (r != kSlowRank) {
      EXPECT_LT(busy[r], busy[kSlowRank]) << "rank " << r;
    }
  }
  const std::string log = log_of("slow");
  EXPECT_NE(log.find("straggler: rank 2 flagged at step 4"), std::string::npos) << log;
}

// Without the hook the ranks do the same work. A tiny-GPT micro-step computes in about a
// millisecond, so one scheduler hiccup on a loaded 2-core machine running three ranks makes a
// single step several times the median (measured: up to 7x). Hence 4 micro-steps per step and
// a threshold of 3 (three times the median, three steps running); the slowed run above passes
// the default 1.5 by far more (about 40x).
TEST_F(Stragglers, EvenRanksFlagNobody) {
  const auto records =
      run("even", "", "--set train.straggler_threshold=3 --set train.grad_accum=4");
  int steps = 0;
  for (const auto& r : records) {
    if (!r.contains("ms_per_step")) continue;
    ++steps;
    EXPECT_TRUE(r.contains("straggler_max_ratio")) << r.dump();
    EXPECT_FALSE(r.contains("straggler_rank")) << r.dump();
  }
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(log_of("even").find("straggler: rank"), std::string::npos);
}

// 0 turns the exchange off: no straggler keys; a ratio of 1 or less is refused by name.
TEST_F(Stragglers, ThresholdZeroDisablesAndBadValuesAreRefused) {
  const auto records = run("off", "", "--set train.straggler_threshold=0 --set train.steps=2");
  ASSERT_FALSE(records.empty());
  for (const auto& r : records) EXPECT_FALSE(r.contains("straggler_max_ratio")) << r.dump();
  const auto bad =
      run_command(std::string(BRIGADE_BINARY) + " train " + config_ + " --set run.out_dir=" + dir_ +
                  "/bad --set train.straggler_threshold=0.9");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("train.straggler_threshold = 0.9"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace brigade
