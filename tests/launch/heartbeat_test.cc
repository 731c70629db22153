// The heartbeat channel between a worker and its launcher (runtime/heartbeat.h): the sender's
// timing and shutdown over a real socket pair, the environment it is started from, and the
// agent-side watch that turns silence into "hung".
#include "brigade/runtime/heartbeat.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "brigade/base/error.h"

namespace brigade {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct SocketPair {
  int agent = -1, worker = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    agent = fds[0];
    worker = fds[1];
  }
  ~SocketPair() {
    if (agent >= 0) ::close(agent);
    if (worker >= 0) ::close(worker);
  }
  // Bytes the agent end receives within `timeout`.
  std::string read_for(milliseconds timeout) {
    std::string got;
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      pollfd p{agent, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
      char buf[256];
      ssize_t n = ::read(agent, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
};

struct EnvGuard {
  ~EnvGuard() {
    ::unsetenv(kHeartbeatFdEnv);
    ::unsetenv(kHeartbeatIntervalEnv);
  }
};

TEST(Heartbeat, BeatsAtTheIntervalAndSaysGoodbye) {
  SocketPair pair;
  std::string got;
  {
    HeartbeatSender sender(pair.worker, milliseconds(50));
    got = pair.read_for(milliseconds(520));
  }
  // One beat at once, then one per 50 ms: about 11 in 520 ms. The bound below only needs the
  // sender thread to be scheduled, not punctual, on a loaded machine.
  EXPECT_GE(got.size(), 5u) << got;
  EXPECT_LE(got.size(), 12u) << got;
  EXPECT_EQ(got.find_first_not_of(kHeartbeatBeat), std::string::npos) << got;
  // Its destructor sent the end marker, and nothing after it.
  got = pair.read_for(milliseconds(100));
  EXPECT_EQ(got, std::string(1, kHeartbeatEnd));
  // The destructor stops at once (not after an interval) and sends the end marker last.
  auto start = Clock::now();
  std::string rest;
  {
    HeartbeatSender sender(pair.worker, milliseconds(60000));
    rest = pair.read_for(milliseconds(50));
  }
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  rest += pair.read_for(milliseconds(50));
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front(), kHeartbeatBeat);
  EXPECT_EQ(rest.back(), kHeartbeatEnd);
}

TEST(Heartbeat, AGoneAgentNeitherBlocksNorKillsTheWorker) {
  SocketPair pair;
  ::close(pair.agent);  // a send now fails with EPIPE; without MSG_NOSIGNAL, SIGPIPE kills us
  pair.agent = -1;
  HeartbeatSender sender(pair.worker, milliseconds(1));
  ::usleep(20000);
  SUCCEED();
}

TEST(Heartbeat, AFullSocketDropsBeatsInsteadOfBlocking) {
  SocketPair pair;
  int flags = ::fcntl(pair.worker, F_GETFL);
  ::fcntl(pair.worker, F_SETFL, flags | O_NONBLOCK);
  char junk[4096] = {};
  while (::send(pair.worker, junk, sizeof(junk), MSG_DONTWAIT) > 0) {
  }
  ::fcntl(pair.worker, F_SETFL, flags);  // blocking again: a plain write() would now hang
  auto start = Clock::now();
  { HeartbeatSender sender(pair.worker, milliseconds(1)); }
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(Heartbeat, StartsFromTheEnvironment) {
  EnvGuard guard;
  ::unsetenv(kHeartbeatFdEnv);
  EXPECT_EQ(start_heartbeat_from_env(), nullptr) << "no agent asked: no heartbeat";

  SocketPair pair;
  ::setenv(kHeartbeatFdEnv, std::to_string(pair.worker).c_str(), 1);
  ::setenv(kHeartbeatIntervalEnv, "20", 1);
  auto sender = start_heartbeat_from_env();
  ASSERT_NE(sender, nullptr);
  EXPECT_EQ(sender->fd(), pair.worker);
  EXPECT_EQ(sender->interval(), milliseconds(20));
  EXPECT_FALSE(pair.read_for(milliseconds(100)).empty());
}

TEST(Heartbeat, MalformedEnvironmentIsAConfigErrorNamingTheVariable) {
  EnvGuard guard;
  SocketPair pair;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const std::string sock = std::to_string(pair.worker);
  struct Case {
    std::string fd, interval, expect;
  };
  for (const Case& c :
       {Case{"x", "10", kHeartbeatFdEnv}, Case{"1", "10", kHeartbeatFdEnv},
        Case{"999999", "10", kHeartbeatFdEnv},
        Case{std::to_string(pipe_fds[0]), "10", "not an open socket"},
        Case{sock, "", kHeartbeatIntervalEnv}, Case{sock, "0", kHeartbeatIntervalEnv},
        Case{sock, "5ms", kHeartbeatIntervalEnv}}) {
    ::setenv(kHeartbeatFdEnv, c.fd.c_str(), 1);
    ::setenv(kHeartbeatIntervalEnv, c.interval.c_str(), 1);
    try {
      start_heartbeat_from_env();
      ADD_FAILURE() << "accepted fd '" << c.fd << "' interval '" << c.interval << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(HeartbeatWatch, ArmsOnTheFirstBeatAndDisarmsOnTheEnd) {
  HeartbeatWatch watch;
  const auto t0 = Clock::now();
  const milliseconds timeout(1000);
  EXPECT_FALSE(watch.overdue(t0 + std::chrono::hours(1), timeout)) << "never beat: not watched";
  const char beat[] = {kHeartbeatBeat};
  watch.on_bytes(beat, 1, t0);
  EXPECT_TRUE(watch.armed());
  EXPECT_FALSE(watch.overdue(t0 + milliseconds(1000), timeout));
  EXPECT_TRUE(watch.overdue(t0 + milliseconds(1001), timeout));
  const char more[] = {kHeartbeatBeat, kHeartbeatBeat};
  watch.on_bytes(more, 2, t0 + milliseconds(900));
  EXPECT_FALSE(watch.overdue(t0 + milliseconds(1500), timeout));
  EXPECT_TRUE(watch.overdue(t0 + milliseconds(1901), timeout));
  const char end[] = {kHeartbeatEnd};
  watch.on_bytes(end, 1, t0 + milliseconds(1000));
  EXPECT_FALSE(watch.armed());
  EXPECT_FALSE(watch.overdue(t0 + std::chrono::hours(1), timeout));
}

TEST(HeartbeatWatch, IntervalIsAQuarterOfTheTimeoutWithinBounds) {
  EXPECT_EQ(heartbeat_interval_for(milliseconds(2000)), milliseconds(500));
  EXPECT_EQ(heartbeat_interval_for(milliseconds(30000)), milliseconds(1000));
  EXPECT_EQ(heartbeat_interval_for(milliseconds(20)), milliseconds(10));
}

}  // namespace
}  // namespace brigade
