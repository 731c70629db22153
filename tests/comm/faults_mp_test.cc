// Failures become CommError within the timeout, never a hang: a rank that never joins, a rank
// killed in the middle of an all_reduce, a rank that stalls, a recv nobody answers. Each case
// measures the elapsed time and checks the message names the operation, group and peer. A
// process with a communicator survives writing to a closed socket (Gloo's writev to a peer that
// died would otherwise kill it with SIGPIPE), unless it handles SIGPIPE itself.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "brigade/base/error.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;
using testutil::Clock;
using testutil::ms_since;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(FaultsMpTest, RankThatNeverJoinsIsNamedAfterTheTimeout) {
  testutil::TempDir dir;
  // World of 3, but rank 2 is never started.
  auto result = testutil::run_some_ranks({0, 1}, 20s, [&](int rank) {
    const auto start = Clock::now();
    try {
      auto comm = testutil::make_file_comm(dir.path(), rank, 3, 1500ms);
      ADD_FAILURE() << "communicator created without rank 2";
    } catch (const CommError& e) {
      const int64_t elapsed = ms_since(start);
      EXPECT_EQ(e.kind(), CommError::Kind::kTimeout);
      EXPECT_GE(elapsed, 1400);
      EXPECT_LT(elapsed, 3000);
      EXPECT_TRUE(contains(e.what(), "rank 2 did not join")) << e.what();
      EXPECT_TRUE(contains(e.what(), "group 'world'")) << e.what();
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(FaultsMpTest, KilledPeerDuringAllReduceFailsSurvivorsWithinTimeout) {
  testutil::TempDir dir;
  constexpr int64_t kTimeoutMs = 3000;
  auto result = testutil::run_ranks(3, 30s, [&](int rank) {
    auto comm =
        testutil::make_file_comm(dir.path(), rank, 3, std::chrono::milliseconds(kTimeoutMs));
    std::vector<float> v(1 << 22, 1.f);                    // 16 MiB: the all_reduce takes a while
    comm->all_reduce(v.data(), v.size(), ReduceOp::kSum);  // everyone alive and connected
    if (rank == 2) {
      auto work = comm->all_reduce_async(v.data(), v.size(), ReduceOp::kSum);
      std::this_thread::sleep_for(5ms);  // let the transfer start, then die mid-operation
      ::raise(SIGKILL);
    }
    const auto start = Clock::now();
    try {
      for (int i = 0; i < 3; ++i) comm->all_reduce(v.data(), v.size(), ReduceOp::kSum);
      ADD_FAILURE() << "all_reduce kept succeeding after rank 2 was killed";
    } catch (const CommError& e) {
      const int64_t elapsed = ms_since(start);
      EXPECT_LT(elapsed, kTimeoutMs + 1500) << e.what();
      EXPECT_TRUE(contains(e.what(), "all_reduce on group 'world'")) << e.what();
      EXPECT_TRUE(e.kind() == CommError::Kind::kPeerLost || e.kind() == CommError::Kind::kTimeout)
          << e.what();
      if (e.kind() == CommError::Kind::kPeerLost) {
        EXPECT_TRUE(contains(e.what(), "rank 2")) << e.what();
      }
    }
    // The communicator is broken now: the next operation fails at once.
    const auto again = Clock::now();
    try {
      comm->barrier();
      ADD_FAILURE() << "barrier succeeded on a broken communicator";
    } catch (const CommError& e) {
      EXPECT_LT(ms_since(again), 500);
      EXPECT_TRUE(contains(e.what(), "unusable after an earlier failure")) << e.what();
    }
  });
  EXPECT_TRUE(result.of(2).killed_by(SIGKILL)) << result.describe();
  EXPECT_TRUE(result.of(0).ok()) << result.describe();
  EXPECT_TRUE(result.of(1).ok()) << result.describe();
}

// Writes into a pipe whose reader is gone: EPIPE if SIGPIPE is ignored (else the signal).
int write_to_closed_pipe() {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  ::close(fds[0]);
  const char byte = 1;
  const ssize_t n = ::write(fds[1], &byte, 1);
  const int err = n < 0 ? errno : 0;
  ::close(fds[1]);
  return err;
}

void handle_sigpipe(int) {}

TEST(FaultsMpTest, CommunicatorProcessSurvivesWritesToAGonePeer) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(2, 20s, [&](int rank) {
    if (rank == 1) {
      // A program that handles SIGPIPE itself keeps its handler.
      struct sigaction own {};
      own.sa_handler = handle_sigpipe;
      sigemptyset(&own.sa_mask);
      ASSERT_EQ(::sigaction(SIGPIPE, &own, nullptr), 0);
    } else {
      ::signal(SIGPIPE, SIG_DFL);  // as `brigade launch` starts its workers
    }
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 3000ms);
    struct sigaction now {};
    ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
    if (rank == 1) {
      EXPECT_EQ(now.sa_handler, &handle_sigpipe);
    } else {
      EXPECT_EQ(now.sa_handler, SIG_IGN);
    }
    EXPECT_EQ(write_to_closed_pipe(), EPIPE);  // and the process is still here
    comm->barrier();
  });
  EXPECT_TRUE(testutil::AllRanksOk(result)) << result.describe();
}

TEST(FaultsMpTest, StalledPeerTimesOutThenItsLateCallFailsToo) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(2, 20s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 1000ms);
    std::vector<float> v(1000, 1.f);
    if (rank == 1) std::this_thread::sleep_for(2500ms);  // misses rank 0's all_reduce
    const auto start = Clock::now();
    try {
      comm->all_reduce(v.data(), v.size(), ReduceOp::kSum);
      ADD_FAILURE() << "all_reduce succeeded although the peer was late";
    } catch (const CommError& e) {
      const int64_t elapsed = ms_since(start);
      if (rank == 0) {
        EXPECT_EQ(e.kind(), CommError::Kind::kTimeout) << e.what();
        EXPECT_GE(elapsed, 950);
        EXPECT_LT(elapsed, 2500);
        EXPECT_TRUE(contains(e.what(), "timed out")) << e.what();
        EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
      } else {
        // Rank 0 gave up and closed its connections: the late rank learns at once or by timeout.
        EXPECT_LT(elapsed, 2500) << e.what();
      }
    }
    if (rank == 0) std::this_thread::sleep_for(2000ms);  // stay until rank 1 has tried
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(FaultsMpTest, UnansweredRecvTimesOutNamingThePeer) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(2, 20s, [&](int rank) {
    auto comm = testutil::make_file_comm(dir.path(), rank, 2, 800ms);
    if (rank == 1) {
      std::this_thread::sleep_for(1500ms);  // never sends
      return;
    }
    std::vector<char> buf(64);
    const auto start = Clock::now();
    auto work = comm->recv_async(buf.data(), buf.size(), 1, 5);
    try {
      work->wait();
      ADD_FAILURE() << "recv completed without a sender";
    } catch (const CommError& e) {
      EXPECT_EQ(e.kind(), CommError::Kind::kTimeout) << e.what();
      EXPECT_GE(ms_since(start), 750);
      EXPECT_LT(ms_since(start), 2000);
      EXPECT_TRUE(contains(e.what(), "recv on group 'world'")) << e.what();
      EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
    }
    EXPECT_TRUE(work->is_completed());
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
