#pragma once
// Multi-process test harness: run_ranks(N, timeout, fn) forks N child processes that each run
// fn(rank), then waits for all of them with a bounded timeout and SIGKILLs stragglers.
//
// Inside a child, GoogleTest assertions work as usual (EXPECT_*, ASSERT_* return from fn); the
// child exits 1 if any failed, 2 if fn threw, 0 otherwise. Children die with the parent
// (PR_SET_PDEATHSIG). Only the exit status and the shared stdout/stderr come back.
//
//   TempDir dir;
//   auto result = run_ranks(4, 20s, [&](int rank) { ... EXPECT_EQ(...); });
//   EXPECT_TRUE(AllRanksOk(result));
//
// Fork before creating threads in the parent: the children start from a single-threaded copy.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "brigade/base/check.h"

namespace brigade::testutil {

inline constexpr int kChildAssertionFailed = 1;
inline constexpr int kChildThrew = 2;

struct RankOutcome {
  enum class Kind { kExited, kSignaled, kTimedOut };
  Kind kind = Kind::kExited;
  int code = 0;  // exit code, or signal number

  bool ok() const { return kind == Kind::kExited && code == 0; }
  bool killed_by(int signal) const { return kind == Kind::kSignaled && code == signal; }
  std::string describe() const {
    switch (kind) {
      case Kind::kExited:
        return code == 0 ? "ok"
                         : "exit " + std::to_string(code) +
                               (code == kChildAssertionFailed ? " (assertion failed)"
                                : code == kChildThrew         ? " (uncaught exception)"
                                                              : "");
      case Kind::kSignaled:
        return "killed by signal " + std::to_string(code);
      case Kind::kTimedOut:
        return "timed out (killed)";
    }
    return "?";
  }
};

struct RunResult {
  std::vector<int> ranks;  // which rank each outcome belongs to
  std::vector<RankOutcome> outcomes;
  std::chrono::milliseconds elapsed{0};

  const RankOutcome& of(int rank) const {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank) return outcomes[i];
    }
    BRIGADE_CHECK(false) << "rank " << rank << " was not run";
    return outcomes[0];
  }
  std::string describe() const {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i) {
      s += "rank " + std::to_string(ranks[i]) + ": " + outcomes[i].describe() + "; ";
    }
    return s + "elapsed " + std::to_string(elapsed.count()) + " ms";
  }
};

// Runs fn(rank) for each listed rank in its own process (a subset lets a test leave a rank out).
inline RunResult run_some_ranks(const std::vector<int>& ranks, std::chrono::milliseconds timeout,
                                const std::function<void(int rank)>& fn) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank : ranks) {
    pid_t pid = ::fork();
    BRIGADE_CHECK(pid >= 0) << "fork failed";
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(3);
      brigade::detail::set_log_rank(rank);
      int code = 0;
      try {
        fn(rank);
        code = ::testing::Test::HasFailure() ? kChildAssertionFailed : 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] uncaught exception: %s\n", rank, e.what());
        code = kChildThrew;
      } catch (...) {
        std::fprintf(stderr, "[rank %d] uncaught non-standard exception\n", rank);
        code = kChildThrew;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  RunResult result;
  result.ranks = ranks;
  result.outcomes.resize(ranks.size());
  std::vector<bool> done(ranks.size(), false);
  size_t remaining = ranks.size();
  const auto deadline = start + timeout;
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        if (WIFSIGNALED(status)) {
          result.outcomes[i] = {RankOutcome::Kind::kSignaled, WTERMSIG(status)};
        } else {
          result.outcomes[i] = {RankOutcome::Kind::kExited, WEXITSTATUS(status)};
        }
      }
    }
    if (remaining > 0 && Clock::now() >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        int status = 0;
        ::waitpid(pids[i], &status, 0);
        done[i] = true;
        result.outcomes[i] = {RankOutcome::Kind::kTimedOut, 0};
        std::fprintf(stderr, "run_ranks: rank %d did not finish within %lld ms, killed\n", ranks[i],
                     static_cast<long long>(timeout.count()));
      }
      remaining = 0;
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return result;
}

inline RunResult run_ranks(int n, std::chrono::milliseconds timeout,
                           const std::function<void(int rank)>& fn) {
  std::vector<int> ranks(n);
  for (int r = 0; r < n; ++r) ranks[r] = r;
  return run_some_ranks(ranks, timeout, fn);
}

inline ::testing::AssertionResult AllRanksOk(const RunResult& r) {
  for (const auto& o : r.outcomes) {
    if (!o.ok()) return ::testing::AssertionFailure() << r.describe();
  }
  return ::testing::AssertionSuccess() << r.describe();
}

// A fresh directory under the build's test-tmp (or /tmp), removed with everything in it when
// the object goes out of scope in the process that created it.
class TempDir {
 public:
  TempDir() {
#ifdef BRIGADE_TEST_TMP
    std::string base = BRIGADE_TEST_TMP;
#else
    std::string base = "/tmp";
#endif
    std::filesystem::create_directories(base);
    std::string tmpl = base + "/comm-XXXXXX";
    BRIGADE_CHECK(::mkdtemp(tmpl.data()) != nullptr) << "mkdtemp " << tmpl;
    path_ = tmpl;
    owner_ = ::getpid();
  }
  ~TempDir() {
    if (::getpid() == owner_) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const {
    return path_;
  }

 private:
  std::string path_;
  pid_t owner_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel does not hand it out again at
// once, so a child can bind it right after).
inline int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BRIGADE_CHECK(fd >= 0) << "socket";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  BRIGADE_CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) << "bind";
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace brigade::testutil
