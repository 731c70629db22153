// An asynchronous checkpoint that fails for lack of disk space (one write fails with ENOSPC,
// torn, through base/file_io.h's fault injection) is logged with the reason, training goes on,
// and the next checkpoint succeeds; the run ends with the same state as one without the fault.
//
// The trainer runs in this process (one rank), so the fault reaches its background save. Which
// write to fail is found by counting: the only writes through the wrapper are the run folder's
// at start and the checkpoints', and every save of this run writes the same bytes, so two
// fault-free runs (2 and 3 checkpoints) give the start's count and one save's.
#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/runtime/config.h"
#include "brigade/train/trainer.h"
#include "common/checkpoint_tensors.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade::testing {
namespace {

const std::string kConfig = testing::tiny_gpt_config(
    {{"train.min_lr", "1e-4"}, {"train.ckpt_every", "5"}, {"train.keep_checkpoints", "5"}});

class AsyncCheckpointFault : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("async-ckpt-fault"); }
  void TearDown() override { detail::set_io_fault(std::nullopt); }

  // Trains `steps` steps into <dir>/<out>/tiny; returns the exit code.
  int train_run(const std::string& out, int64_t steps) {
    Config config =
        parse_config(kConfig, "test",
                     {"run.out_dir=" + dir_ + "/" + out, "train.steps=" + std::to_string(steps)});
    config.validate();
    return train(config);
  }
  // The writes a fault-free run makes through the I/O wrapper.
  int64_t writes_of(const std::string& out, int64_t steps) {
    detail::set_io_fault(detail::IoFault{.op = detail::IoOp::kWrite, .nth = INT64_MAX});
    EXPECT_EQ(train_run(out, steps), 0);
    const int64_t n = detail::io_op_count(detail::IoOp::kWrite);
    detail::set_io_fault(std::nullopt);
    return n;
  }
  std::string ckpt(const std::string& out, int64_t step) {
    return dir_ + "/" + out + "/tiny/checkpoints/step_" + fmt_step(step);
  }
  static std::string fmt_step(int64_t step) {
    std::string s = std::to_string(step);
    return std::string(8 - s.size(), '0') + s;
  }

  std::string dir_;
};

TEST_F(AsyncCheckpointFault, FullDiskIsLoggedTrainingGoesOnAndTheNextSaveSucceeds) {
  const int64_t two = writes_of("count2", 10);       // start + saves at 5, 10
  const int64_t three = writes_of("reference", 15);  // start + saves at 5, 10, 15
  const int64_t per_save = three - two;
  const int64_t at_start = two - 2 * per_save;
  ASSERT_GT(per_save, 0);
  ASSERT_GE(at_start, 0);

  // The first write of the save at step 5 fails; the disk has room again afterwards.
  detail::set_io_fault(detail::IoFault{.op = detail::IoOp::kWrite,
                                       .nth = at_start + 1,
                                       .error = ENOSPC,
                                       .torn = true,
                                       .once = true});
  ASSERT_EQ(train_run("faulty", 15), 0);
  detail::set_io_fault(std::nullopt);

  const std::string log = read_file(dir_ + "/faulty/tiny/train.log");
  EXPECT_NE(log.find("checkpoint of step 5 failed"), std::string::npos) << log;
  EXPECT_NE(log.find(std::strerror(ENOSPC)), std::string::npos) << log;
  EXPECT_NE(log.find("checkpoint " + ckpt("faulty", 10)), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(ckpt("faulty", 5)));
  EXPECT_TRUE(std::filesystem::exists(ckpt("faulty", 10) + "/manifest.json"));
  EXPECT_EQ(read_file(dir_ + "/faulty/tiny/checkpoints/latest"), latest_file_text(15));
  // Training was not disturbed: the final state equals the fault-free run's, bit for bit.
  for (auto part : {CkptPart::kModel, CkptPart::kState}) {
    const auto want = read_checkpoint(ckpt("reference", 15), part);
    ASSERT_FALSE(want.empty());
    EXPECT_TRUE(read_checkpoint(ckpt("faulty", 15), part) == want);
  }
}

// The checkpoint of the last step has no next interval to retry it: a full disk that stays full
// through the retry must fail the run (exit 8, SaveError), naming the last saved step, never
// report success with the last steps unsaved.
TEST_F(AsyncCheckpointFault, FinalSaveThatFailsAgainFailsTheRunNamingTheLastSavedStep) {
  const int64_t one = writes_of("count1", 5);   // start + save at 5
  const int64_t two = writes_of("count2", 10);  // start + saves at 5, 10
  const int64_t per_save = two - one;
  ASSERT_GT(per_save, 0);
  // From the first write of the save at step 10 on, the disk is full (and stays full).
  detail::set_io_fault(
      detail::IoFault{.op = detail::IoOp::kWrite, .nth = one + 1, .error = ENOSPC, .torn = true});
  try {
    train_run("full", 10);
    ADD_FAILURE() << "the run reported success with step 10 unsaved";
  } catch (const SaveError& e) {
    EXPECT_EQ(e.exit_code(), 8);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("checkpoint of step 10 could not be saved"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the last saved step is 5"), std::string::npos) << msg;
  }
  detail::set_io_fault(std::nullopt);
  const std::string log = read_file(dir_ + "/full/tiny/train.log");
  EXPECT_NE(log.find("retrying the checkpoint of step 10"), std::string::npos) << log;
  EXPECT_EQ(log.find("the next checkpoint retries"), std::string::npos) << log;
  EXPECT_EQ(log.find("done:"), std::string::npos) << log;
  EXPECT_EQ(read_file(dir_ + "/full/tiny/checkpoints/latest"), latest_file_text(5));
}

// Space freed before the retry: the retry saves it and the run succeeds.
TEST_F(AsyncCheckpointFault, FinalSaveIsRetriedAfterAShortWait) {
  const int64_t one = writes_of("count1", 5);
  detail::set_io_fault(detail::IoFault{
      .op = detail::IoOp::kWrite, .nth = one + 1, .error = ENOSPC, .torn = true, .once = true});
  ASSERT_EQ(train_run("retried", 10), 0);
  detail::set_io_fault(std::nullopt);
  const std::string log = read_file(dir_ + "/retried/tiny/train.log");
  EXPECT_NE(log.find("checkpoint of step 10 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("retrying the checkpoint of step 10"), std::string::npos) << log;
  EXPECT_NE(log.find("checkpoint " + ckpt("retried", 10)), std::string::npos) << log;
  EXPECT_EQ(read_file(dir_ + "/retried/tiny/checkpoints/latest"), latest_file_text(10));
}

// metrics.jsonl on a full disk: the first failed record is logged once, every one is counted,
// and the file holds only whole records (a torn line is cut off again).
TEST_F(AsyncCheckpointFault, MetricsWriteFailuresAreReportedOnceAndCounted) {
  detail::set_io_fault(detail::IoFault{.op = detail::IoOp::kAppend,
                                       .nth = 4,
                                       .error = ENOSPC,
                                       .torn = true,
                                       .path_contains = "metrics.jsonl"});
  ASSERT_EQ(train_run("metrics", 10), 0);
  detail::set_io_fault(std::nullopt);
  // 1 start event + 10 step records + 1 final evaluation + 1 summary = 13 records, of which
  // the first 3 were written.
  const std::string metrics = read_file(dir_ + "/metrics/tiny/metrics.jsonl");
  size_t lines = 0;
  for (size_t at = 0; (at = metrics.find('\n', at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 3u) << metrics;
  EXPECT_EQ(metrics.back(), '\n');
  const std::string log = read_file(dir_ + "/metrics/tiny/train.log");
  const std::string first =
      "cannot write " + dir_ + "/metrics/tiny/metrics.jsonl: " + std::strerror(ENOSPC);
  const size_t at = log.find(first);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(first, at + 1), std::string::npos) << "logged more than once:\n" << log;
  EXPECT_NE(log.find("10 metrics records could not be written"), std::string::npos) << log;
}

}  // namespace
}  // namespace brigade::testing
