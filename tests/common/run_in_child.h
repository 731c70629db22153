#pragma once
// Runs a function in a forked child, bounded in time (and optionally in memory), and says how it
// ended: for regression tests of inputs that used to crash, hang or exhaust memory, so that the
// old behaviour fails the test instead of taking the test binary (or the machine) down.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "brigade/base/error.h"

namespace brigade::testing {

struct ChildOutcome {
  bool finished = false;  // returned or threw; false: killed by a signal or by the time limit
  bool timed_out = false;
  int signal = 0;          // the signal that ended it, when !finished && !timed_out
  int exit_code = -1;      // 0 returned; the brigade::Error's exit code; 1 another exception
  std::string message;     // what() of the exception (the first 64 KiB)
  std::string error_type;  // "brigade::Error", "std::exception" or ""
  double seconds = 0;

  std::string describe() const {
    if (timed_out) return "timed out after " + std::to_string(seconds) + " s";
    if (!finished) return std::string("killed by ") + strsignal(signal);
    return "exit " + std::to_string(exit_code) + (error_type.empty() ? "" : " (" + error_type) +
           (message.empty() ? "" : ": " + message.substr(0, 300)) + (error_type.empty() ? "" : ")");
  }
};

// memory_limit_bytes > 0 caps the child's address space (RLIMIT_AS); ignored under ASan, whose
// shadow memory needs terabytes of address space.
inline ChildOutcome run_in_child(const std::function<void()>& f, double timeout_s = 30,
                                 int64_t memory_limit_bytes = 0) {
  int fds[2];
  ChildOutcome out;
  if (::pipe(fds) != 0) return out;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    (void)memory_limit_bytes;
#if !defined(__SANITIZE_ADDRESS__)
    if (memory_limit_bytes > 0) {
      const rlimit lim{static_cast<rlim_t>(memory_limit_bytes),
                       static_cast<rlim_t>(memory_limit_bytes)};
      ::setrlimit(RLIMIT_AS, &lim);
    }
#endif
    int code = 0;
    std::string text;
    try {
      f();
    } catch (const Error& e) {
      code = e.exit_code();
      text = std::string("B") + e.what();
    } catch (const std::exception& e) {
      code = 1;
      text = std::string("S") + e.what();
    }
    if (text.size() > 65536) text.resize(65536);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t w = ::write(fds[1], text.data() + done, text.size() - done);
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  const auto deadline = t0 + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fds[0], POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      out.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!out.timed_out && WIFEXITED(status)) {
    out.finished = true;
    out.exit_code = WEXITSTATUS(status);
  } else if (!out.timed_out && WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  if (!text.empty()) {
    out.error_type = text[0] == 'B' ? "brigade::Error" : "std::exception";
    out.message = text.substr(1);
  }
  return out;
}

}  // namespace brigade::testing
