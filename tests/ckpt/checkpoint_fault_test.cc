// Saving while the disk fails: every write, fsync and rename of a commit is made to fail in
// turn (ENOSPC / EIO), and each time the previous checkpoint must remain the one found, intact,
// and the next save must succeed and clean up.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"
#include "ckpt/checkpoint_test_util.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

using detail::IoFault;
using detail::IoOp;
using testing::TempDir;

// How many calls of kind op one save of step 2 over a saved step 1 makes.
int64_t count_ops(IoOp op) {
  TempDir root;
  testing::save_fake(root.path(), 1);
  detail::set_io_fault(std::nullopt);
  testing::save_fake(root.path(), 2);
  const int64_t n = detail::io_op_count(op);
  detail::set_io_fault(std::nullopt);
  return n;
}

struct Case {
  const char* label;
  IoOp op;
  int error;
};

class CommitFault : public ::testing::TestWithParam<Case> {};

TEST_P(CommitFault, EveryFailingCallLeavesThePreviousCheckpoint) {
  const Case c = GetParam();
  const int64_t total = count_ops(c.op);
  ASSERT_GT(total, 0);
  for (int64_t nth = 1; nth <= total; ++nth) {
    SCOPED_TRACE(std::string(c.label) + " #" + std::to_string(nth) + " of " +
                 std::to_string(total));
    TempDir root;
    testing::save_fake(root.path(), 1);
    {
      detail::ScopedIoFault fault(IoFault{.op = c.op, .nth = nth, .error = c.error});
      EXPECT_THROW_WITH(testing::save_fake(root.path(), 2), IoError, root.path(),
                        std::strerror(c.error));
    }
    // Only the very last call, the fsync of the root after `latest` was renamed, fails after
    // the commit point: then `latest` already names the new, complete checkpoint (whose
    // survival of a power loss is what could not be confirmed).
    const bool after_commit_point = c.op == IoOp::kFsync && nth == total;
    const int64_t expected_step = after_commit_point ? 2 : 1;
    EXPECT_EQ(testing::read_raw(root / "latest"), latest_file_text(expected_step));
    std::vector<std::string> rejections;
    auto r = CheckpointReader::open_latest_valid(root.path(), &rejections);
    ASSERT_TRUE(r.has_value());
    testing::expect_holds_step(*r, expected_step);
    EXPECT_TRUE(rejections.empty()) << rejections.front();
    testing::expect_holds_step(CheckpointReader::open(root / "step_00000001"), 1);

    // The disk has space again: the next save works and leaves no temporary folder behind.
    testing::save_fake(root.path(), 3);
    testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path()), 3);
    for (const std::string& name : testing::list_dir(root.path())) {
      EXPECT_FALSE(name.ends_with(".tmp")) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CommitFault,
                         ::testing::Values(Case{"write", IoOp::kWrite, ENOSPC},
                                           Case{"fsync", IoOp::kFsync, EIO},
                                           Case{"rename", IoOp::kRename, ENOSPC}),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(CommitFaultFirstSave, NoCheckpointIsFoundAfterAFailedFirstSave) {
  TempDir root;
  {
    detail::ScopedIoFault fault(IoFault{.op = IoOp::kWrite, .nth = 3, .error = ENOSPC});
    EXPECT_THROW(testing::save_fake(root.path(), 1), IoError);
  }
  std::vector<std::string> rejections;
  EXPECT_FALSE(CheckpointReader::open_latest_valid(root.path(), &rejections).has_value());
  EXPECT_TRUE(rejections.empty());
}

// Failures after the commit point (cleanup of old checkpoints) only warn: the save succeeded.
TEST(CommitFaultCleanup, RetentionFailureDoesNotFailTheSave) {
  TempDir root;
  testing::save_fake(root.path(), 1, 1);
  detail::set_io_fault(std::nullopt);
  testing::save_fake(root.path(), 2, 1);
  const int64_t renames = detail::io_op_count(IoOp::kRename);  // staging, latest, retire step 1
  ASSERT_EQ(renames, 3);
  {
    detail::ScopedIoFault fault(IoFault{.op = IoOp::kRename, .nth = 3, .error = EIO});
    EXPECT_NO_THROW(testing::save_fake(root.path(), 3, 1));
  }
  testing::expect_holds_step(*CheckpointReader::open_latest_valid(root.path()), 3);
  EXPECT_TRUE(std::filesystem::exists(root / "step_00000002"));  // could not be retired
  testing::save_fake(root.path(), 4, 1);                         // retried next time
  EXPECT_EQ(testing::list_dir(root.path()), (std::vector<std::string>{"latest", "step_00000004"}));
}

}  // namespace
}  // namespace brigade
