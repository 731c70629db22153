// The rendezvous store's token under `brigade launch` (issue 13, defect 5): every launch gives
// its workers a fresh random BRIGADE_STORE_TOKEN unless the user exported one (which must win,
// so that the nodes of a multi-node job can share it), a multi-node launch without one is
// refused before anything starts, a real training job rendezvouses through rank 0's TCP store
// with the token, and the token appears nowhere: not in the launcher's output, the workers'
// logs, nor the run folder. Workers started by hand without a token still work, with one
// warning. The real binary runs small /bin/sh workers (--exec) or tiny training jobs on
// 127.0.0.1; every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "brigade/base/error.h"
#include "brigade/runtime/host_port.h"
#include "common/run_command.h"
#include "common/tiny_gpt_config.h"
#include "launch/launch_test_util.h"

namespace brigade::store_token_mp_test {
namespace {

using testing::BackgroundBrigade;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::processes_with_env;
using testing::read_text;

constexpr double kLaunchTimeout = 15;
constexpr double kTrainTimeout = 120;

bool is_lower_hex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Every file under `dir` that contains `needle`.
std::vector<std::string> files_containing(const std::string& dir, const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file() && read_text(e.path().string()).find(needle) != std::string::npos) {
      found.push_back(e.path().string());
    }
  }
  return found;
}

class StoreToken : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("store-token");
    ASSERT_FALSE(dir_.empty());
    run_id_ = "tok-" + std::to_string(::getpid()) + "-" + std::to_string(++count_);
    ::setenv("TMPDIR", dir_.c_str(), 1);
    // The launches below inherit this environment: start from "the user gave no token".
    ::unsetenv("BRIGADE_STORE_TOKEN");
    ::unsetenv("BRIGADE_STORE_DIR");
  }
  void TearDown() override {
    for (pid_t pid : processes_with_env("BRIGADE_RUN_ID=" + run_id_)) ::kill(pid, SIGKILL);
  }

  // A --exec worker that records "<length> <token>" of its BRIGADE_STORE_TOKEN and the mode of
  // its store folder in $D/token.$RANK, then runs `then`.
  std::vector<std::string> token_writer(int nproc, const std::string& dir,
                                        const std::string& then = "") {
    const std::string script =
        "D='" + dir +
        "'\n"
        "t=\"${BRIGADE_STORE_TOKEN:-}\"\n"
        "mode=$(stat -c %a \"$BRIGADE_STORE_DIR\" 2>/dev/null || echo none)\n"
        "echo \"${#t} $mode $t\" > \"$D/token.$RANK.tmp\" && mv \"$D/token.$RANK.tmp\" "
        "\"$D/token.$RANK\"\n"
        "echo \"worker $RANK is here\"\n" +
        then;
    return {
        "launch", "--nproc", std::to_string(nproc), "--run-id", run_id_, "--exec", "--", "/bin/sh",
        "-c",     script};
  }

  struct Seen {
    size_t length = 0;
    std::string store_dir_mode, token;
  };
  static Seen read_token(const std::string& path) {
    Seen s;
    std::istringstream in(read_text(path));
    in >> s.length >> s.store_dir_mode >> s.token;
    return s;
  }

  std::string dir_, run_id_;
  static inline int count_ = 0;
};

TEST_F(StoreToken, LaunchGivesItsWorkersOneFreshTokenAndNeverPrintsIt) {
  std::set<std::string> tokens;
  for (int launch = 0; launch < 2; ++launch) {
    const std::string dir = testing::make_temp_dir("store-token");
    BackgroundBrigade l(token_writer(2, dir), dir);
    ASSERT_EQ(l.wait(kLaunchTimeout), 0) << l.err();
    Seen r0 = read_token(dir + "/token.0"), r1 = read_token(dir + "/token.1");
    EXPECT_GE(r0.length, 32u) << "BRIGADE_STORE_TOKEN is missing or short: '" << r0.token << "'";
    EXPECT_EQ(r0.length, r0.token.size());
    EXPECT_TRUE(is_lower_hex(r0.token)) << r0.token;
    EXPECT_EQ(r0.token, r1.token) << "the workers of one launch disagree on the token";
    // The one-node file store is guarded by its folder: private to this user.
    EXPECT_EQ(r0.store_dir_mode, "700");
    const std::string out = l.out() + l.err();
    EXPECT_THAT(out, HasSubstr("worker 1 is here"));  // the relay works: output was seen
    if (!r0.token.empty()) {
      EXPECT_THAT(out, Not(HasSubstr(r0.token))) << "printed the token";
    }
    tokens.insert(r0.token);
  }
  EXPECT_EQ(tokens.size(), 2u) << "two launches got the same token";
}

TEST_F(StoreToken, TheUsersTokenWinsSoThatNodesCanShareIt) {
  const std::string mine = "shared-by-every-node-6f1d2c";
  BackgroundBrigade l(token_writer(2, dir_), dir_, {"BRIGADE_STORE_TOKEN=" + mine});
  ASSERT_EQ(l.wait(kLaunchTimeout), 0) << l.err();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(read_token(dir_ + "/token." + std::to_string(r)).token, mine);
  EXPECT_THAT(l.out() + l.err(), Not(HasSubstr(mine)));

  // A second node with the same token, --nnodes 2: passed on as it is.
  const std::string dir2 = testing::make_temp_dir("store-token");
  std::vector<std::string> args = token_writer(1, dir2);
  args.insert(args.begin() + 1,
              {"--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:29556"});
  BackgroundBrigade node1(args, dir2, {"BRIGADE_STORE_TOKEN=" + mine});
  ASSERT_EQ(node1.wait(kLaunchTimeout), 0) << node1.err();
  EXPECT_EQ(read_token(dir2 + "/token.1").token, mine);
}

TEST_F(StoreToken, MultiNodeLaunchWithoutATokenIsRefusedBeforeAnythingStarts) {
  std::vector<std::string> args = token_writer(1, dir_);
  args.insert(args.begin() + 1,
              {"--nnodes", "2", "--node-rank", "0", "--master", "127.0.0.1:29557"});
  BackgroundBrigade l(args, dir_);
  EXPECT_EQ(l.wait(kLaunchTimeout), kExitConfig) << l.err();
  EXPECT_THAT(l.err(), HasSubstr("BRIGADE_STORE_TOKEN"));
  EXPECT_THAT(l.err(), HasSubstr("--nnodes 2"));
  EXPECT_FALSE(testing::wait_for_file(dir_ + "/token.0", 0)) << "a worker started";

  // A token too long for the store's hello is refused too, without being printed.
  const std::string huge(2000, 'q');
  BackgroundBrigade l2(token_writer(1, dir_), dir_, {"BRIGADE_STORE_TOKEN=" + huge});
  EXPECT_EQ(l2.wait(kLaunchTimeout), kExitConfig) << l2.err();
  EXPECT_THAT(l2.err(), HasSubstr("BRIGADE_STORE_TOKEN"));
  EXPECT_THAT(l2.err(), Not(HasSubstr("qqqq")));
}

// A real job whose ranks rendezvous through rank 0's TCP store (comm.store = "tcp"): the
// launcher's token lets them in, the server has nothing to warn about, and the token is in no
// output and no file of the run.
TEST_F(StoreToken, TrainingRendezvousesOverTcpWithTheLaunchersToken) {
  const std::string config = dir_ + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config(
      {{"train.steps", "2"}, {"comm.store", "\"tcp\""}, {"comm.timeout_s", "30"}});
  const std::string train = "exec \"" + std::string(BRIGADE_BINARY) + "\" train \"" + config +
                            "\" --set run.out_dir=\"" + dir_ + "/out\"\n";
  BackgroundBrigade l(token_writer(2, dir_, train), dir_);
  ASSERT_EQ(l.wait(kTrainTimeout), 0) << l.err();
  const std::string token = read_token(dir_ + "/token.0").token;
  ASSERT_GE(token.size(), 32u);
  const std::string out = l.out() + l.err();
  EXPECT_THAT(out, HasSubstr("data parallel over 2")) << out;
  EXPECT_THAT(out, Not(HasSubstr("unauthenticated")));
  EXPECT_THAT(out, Not(HasSubstr(token)));
  EXPECT_THAT(files_containing(dir_ + "/out", token), ::testing::IsEmpty());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/out/tiny/manifest.json"));
}

// Workers started by hand (torchrun's variables, no launcher, no token) keep working over the
// TCP store; rank 0's server says once that the store is unauthenticated.
TEST_F(StoreToken, HandStartedWorkersWithoutATokenStillWorkAndWarnOnce) {
  const std::string config = dir_ + "/tiny.toml";
  std::ofstream(config) << testing::tiny_gpt_config(
      {{"train.steps", "2"}, {"comm.store", "\"tcp\""}, {"comm.timeout_s", "30"}});
  const int port = pick_free_port();
  std::vector<std::unique_ptr<BackgroundBrigade>> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::string rank_dir = dir_ + "/rank" + std::to_string(r);
    std::filesystem::create_directories(rank_dir);
    ranks.push_back(std::make_unique<BackgroundBrigade>(
        std::vector<std::string>{"train", config, "--set", "run.out_dir=" + dir_ + "/out"},
        rank_dir,
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=2",
                                 "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=2",
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                                 "BRIGADE_RUN_ID=" + run_id_}));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r]->wait(kTrainTimeout), 0) << "rank " << r << ":\n" << ranks[r]->err();
  }
  const std::string err0 = ranks[0]->err();
  const size_t first = err0.find("unauthenticated");
  EXPECT_NE(first, std::string::npos) << err0;
  EXPECT_EQ(err0.find("unauthenticated", first + 1), std::string::npos) << err0;
  EXPECT_THAT(ranks[1]->err(), Not(HasSubstr("unauthenticated")));
}

}  // namespace
}  // namespace brigade::store_token_mp_test
