// A worker SIGKILLed in the middle of a real data-parallel training job: the launcher exits
// non-zero within the timeout, names the rank and the signal, and no process of the job is
// left behind (checked in the process table).
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "brigade/base/file_io.h"
#include "common/run_command.h"

namespace brigade {
namespace {

using ::testing::HasSubstr;
using testing::make_temp_dir;

// pid -> environment of every process whose environment holds `needle`.
std::vector<std::pair<int, std::string>> processes_with_env(const std::string& needle) {
  std::vector<std::pair<int, std::string>> found;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc ? readdir(proc) : nullptr) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string env = ss.str();
    if (env.find(needle) != std::string::npos) found.emplace_back(pid, env);
  }
  if (proc) closedir(proc);
  return found;
}

TEST(LaunchKill, SigkillOfAWorkerMidTrainingStopsTheJobCleanly) {
  std::string dir = make_temp_dir("launch-kill");
  std::string run_id = "kill-test-" + std::to_string(getpid());
  std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 2 --grace 2 --run-id " + run_id +
                    " -- train " + BRIGADE_SOURCE_DIR +
                    "/configs/default.toml --set run.out_dir=" + dir +
                    " --set train.steps=100000 --set comm.timeout_s=10 > " + dir +
                    "/launch.log 2>&1; echo $? > " + dir + "/exit_code";
  std::thread launcher([&] { std::system(("timeout -k 5 120 sh -c '" + cmd + "'").c_str()); });

  // Wait (bounded) until rank 1 trains, then SIGKILL it.
  int victim = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!victim && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string log;
    try {
      log = read_file(dir + "/launch.log");
    } catch (const std::exception&) {
    }
    if (log.find("/100000 |") == std::string::npos) continue;  // no step finished yet
    for (const auto& [pid, env] : processes_with_env("BRIGADE_RUN_ID=" + run_id)) {
      if (env.find(std::string("RANK=1") + '\0') != std::string::npos &&
          env.find("LOCAL_RANK=1") != std::string::npos) {
        victim = pid;
      }
    }
  }
  ASSERT_NE(victim, 0) << "rank 1 never started training";
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  launcher.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();

  EXPECT_LT(seconds, 15.0) << "the launcher took too long to stop the job";
  EXPECT_EQ(read_file(dir + "/exit_code"), "7\n");
  std::string log = read_file(dir + "/launch.log");
  EXPECT_THAT(log, HasSubstr("rank 1 was killed by SIGKILL"));
  EXPECT_TRUE(processes_with_env("BRIGADE_RUN_ID=" + run_id).empty())
      << "processes of the job are still running";
}

}  // namespace
}  // namespace brigade
