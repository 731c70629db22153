// StagedDir (base/staged_dir.h): the target appears only at commit, complete; an error or a
// killed process before that leaves no target; an existing target is refused unless replaced.
#include "brigade/base/staged_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "common/temp_dir.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

TEST(StagedDir, TargetAppearsOnlyAtCommit) {
  testing::TempDir tmp;
  const std::string target = tmp / "out";
  {
    StagedDir dir(target, false);
    make_dirs(dir.staging() + "/client_0");
    write_file_durable(dir.staging() + "/client_0/a.txt", "hello");
    EXPECT_FALSE(fs::exists(target));
    dir.commit();
  }
  EXPECT_EQ(read_file(target + "/client_0/a.txt"), "hello");
  EXPECT_FALSE(fs::exists(target + ".tmp"));
}

TEST(StagedDir, AnErrorBeforeCommitLeavesNothing) {
  testing::TempDir tmp;
  const std::string target = tmp / "out";
  try {
    StagedDir dir(target, false);
    write_file_durable(dir.staging() + "/a.txt", "half");
    throw IoError("disk full");
  } catch (const IoError&) {
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(target + ".tmp"));
}

// A process killed mid-write leaves only the staging folder, which the next run removes.
TEST(StagedDir, AKilledWriterLeavesNoTargetAndItsLeftoversAreCleared) {
  testing::TempDir tmp;
  const std::string target = tmp / "out";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    StagedDir dir(target, false);
    write_file_durable(dir.staging() + "/a.txt", "half");
    ::_exit(0);  // no destructor, no commit: as SIGKILL would leave it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::exists(target + ".tmp/a.txt"));
  StagedDir again(target, false);
  EXPECT_FALSE(fs::exists(again.staging() + "/a.txt"));
  again.commit();
  EXPECT_TRUE(fs::is_empty(target));
}

TEST(StagedDir, AnExistingTargetIsRefusedUnlessReplaced) {
  testing::TempDir tmp;
  const std::string target = tmp / "out";
  make_dirs(target);
  write_file_durable(target + "/old.txt", "old");
  EXPECT_THROW_WITH(StagedDir(target + "/", false), ConfigError, target + " already exists");
  StagedDir dir(target, true);
  write_file_durable(dir.staging() + "/new.txt", "new");
  EXPECT_TRUE(fs::exists(target + "/old.txt"));  // untouched until commit
  dir.commit();
  EXPECT_FALSE(fs::exists(target + "/old.txt"));
  EXPECT_EQ(read_file(target + "/new.txt"), "new");
  EXPECT_FALSE(fs::exists(target + ".old"));
}

}  // namespace
}  // namespace brigade
