// The supervision loop of one group of workers. One thread watches everything through poll():
// a signalfd for SIGINT/SIGTERM/SIGHUP/SIGCHLD (blocked, so they arrive only there), the
// stdout/stderr pipes and the heartbeat socket of every worker, with a timeout of at most kTick
// so that deadlines and heartbeats are checked even when nothing happens. A worker that ended
// is first peeked at with waitid(WNOWAIT): while it is an unreaped zombie its pid cannot be
// reused, so killing its process group then cannot hit a stranger; only after that is it reaped.
//
// Phases: running -> stopping (SIGTERM or the forwarded signal sent, grace period running)
//         -> killing (SIGKILL sent, kKillWait to die) -> done.
// Stopping also sends SIGCONT, so that a stopped (SIGSTOP) worker acts on the SIGTERM.
//
// The failure named is the cause, not its echo: a worker that exits with kExitComm (it lost a
// peer, or a peer published its error) is usually the consequence of another worker's failure
// a moment earlier, and the two zombies can be reaped in either order. Such a failure is held
// for kSettle; a different failure of another worker within it is named instead.
#include "brigade/runtime/launcher_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "brigade/base/error.h"
#include "brigade/monitor/progress.h"
#include "brigade/runtime/heartbeat.h"
#include "brigade/runtime/line_relay.h"
#include "brigade/runtime/live_terminal.h"
#include "brigade/runtime/worker_process.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kKillWait = std::chrono::seconds(10);      // SIGKILL to exit, unless stuck in D
constexpr auto kOrphanWait = std::chrono::seconds(3);     // killing escaped descendants
constexpr auto kDrainWait = std::chrono::seconds(1);      // reading what is left in the pipes
constexpr auto kSettle = std::chrono::milliseconds(500);  // a lost peer's cause to exit too

// Writes all of `bytes` to fd; a closed reader (EPIPE) just drops the output.
void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

struct Worker {
  int rank = 0;
  WorkerProcess proc;
  int beat_fd = -1;  // the launcher's end of the heartbeat socket; -1 when off or closed
  HeartbeatWatch beats;
  bool running = true;
  bool hung = false;  // killed for missed heartbeats, not reaped yet
  std::unique_ptr<LineRelay> out, err;
};

// Which stream of a worker a polled fd is.
enum class Stream { kOut, kErr, kBeat };

class Supervisor {
 public:
  Supervisor(const GroupSpec& spec, SignalScope& signals)
      : o_(spec.options),
        signals_(signals),
        heartbeat_timeout_(std::chrono::milliseconds(
            static_cast<int64_t>(spec.options.heartbeat_timeout_s * 1000))) {
    if (::isatty(STDERR_FILENO) == 1) terminal_ = std::make_unique<LiveTerminal>(STDERR_FILENO);
  }

  ~Supervisor() {
    for (auto& w : workers_) {
      for (int* fd : {&w.proc.out_fd, &w.proc.err_fd, &w.beat_fd}) close_fd(*fd);
    }
  }

  void start(const GroupSpec& spec) {
    spec_ = &spec;
    for (int local = 0; local < o_.nproc; ++local) {
      workers_.push_back(spawn(spec, local));
      ++running_;
    }
  }

  // Starts the worker of local rank `local`, its heartbeat socket and output relays.
  Worker spawn(const GroupSpec& spec, int local) {
    {
      WorkerSpec worker = spec.command;
      int rank = o_.node_rank * o_.nproc + local;
      worker.env = worker_env(spec.base_env, o_, spec.contract, local);
      // The workers' stderr is a pipe; they draw their progress line live as on a terminal when
      // the launcher's is one (runtime/live_terminal.h passes it through).
      if (terminal_) worker.env.push_back(std::string(kLiveProgressEnv) + "=1");
      Worker w;
      w.rank = rank;
      int theirs = -1;
      if (heartbeat_timeout_.count() > 0) {
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
          throw IoError(std::string("socketpair() for a worker's heartbeat: ") +
                        std::strerror(errno));
        }
        w.beat_fd = pair[0];
        theirs = pair[1];
        if (theirs < 3) {  // 0-2 become the worker's stdio; move it out of their way
          int moved = ::fcntl(theirs, F_DUPFD_CLOEXEC, 3);
          ::close(theirs);
          theirs = moved;
          if (theirs < 0) {
            close_fd(w.beat_fd);
            throw IoError(std::string("fcntl(F_DUPFD) for a worker's heartbeat: ") +
                          std::strerror(errno));
          }
        }
        worker.keep_fd = theirs;
        worker.env.push_back(std::string(kHeartbeatFdEnv) + "=" + std::to_string(theirs));
        worker.env.push_back(std::string(kHeartbeatIntervalEnv) + "=" +
                             std::to_string(heartbeat_interval_for(heartbeat_timeout_).count()));
      }
      try {
        w.proc = spawn_worker(worker);  // on IoError, the caller kills the ones already started
      } catch (...) {
        close_fd(theirs);
        close_fd(w.beat_fd);
        throw;
      }
      close_fd(theirs);  // only the worker holds its end now
      // Rank 0's stdout is the job's data: unprefixed (line_relay.h).
      const bool prefix_out = rank != 0;
      if (terminal_) {
        // Rank 0's progress line stays live at the bottom; every other line goes above it.
        w.out = std::make_unique<LineRelay>(
            rank, [this](std::string_view s) { terminal_->line(1, s); }, nullptr, prefix_out);
        w.err = std::make_unique<LineRelay>(
            rank, [this](std::string_view s) { terminal_->line(2, s); },
            [this](std::string_view s) { terminal_->live(s); });
      } else {
        w.out = std::make_unique<LineRelay>(
            rank, [](std::string_view s) { write_all(1, s); }, nullptr, prefix_out);
        w.err = std::make_unique<LineRelay>(rank, [](std::string_view s) { write_all(2, s); });
      }
      return w;
    }
  }

  // Supervises until every worker is reaped (or SIGKILL failed to end one), then clears up.
  GroupOutcome run() {
    while (running_ > 0 && !outcome_.gave_up) {
      poll_once();
      while (int sig = signals_.next()) {
        if (sig != SIGCHLD) on_signal(sig);
      }
      reap();
      check_heartbeats();
      check_held_failure(/*everyone_ended=*/running_ == 0);
      check_deadline();
    }
    finish();
    if (terminal_) terminal_->finish();  // the last progress line stays, and the prompt is below
    return outcome_;
  }

  // Kills whatever was started and reaps it: the path for a failed start.
  void kill_all() {
    for (auto& w : workers_) signal_group(w.proc.pid, SIGKILL);
    kill_and_reap_children(Clock::now() + kKillWait);
  }

 private:
  enum class Phase { kRunning, kStopping, kKilling };

  void poll_once() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<Worker*, Stream>> owners{{nullptr, Stream::kOut}};
    for (auto& w : workers_) {
      for (Stream s : {Stream::kOut, Stream::kErr, Stream::kBeat}) {
        int fd = fd_of(w, s);
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        owners.push_back({&w, s});
      }
    }
    auto timeout = kTick;
    auto wake_at = [&](Clock::time_point t) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
      timeout =
          std::clamp(left + std::chrono::milliseconds(1), std::chrono::milliseconds(0), timeout);
    };
    if (phase_ != Phase::kRunning) wake_at(deadline_);
    if (held_) wake_at(held_->until);
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (n <= 0) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_stream(*owners[i].first, owners[i].second);
    }
  }

  static int& fd_of(Worker& w, Stream s) {
    return s == Stream::kOut ? w.proc.out_fd : s == Stream::kErr ? w.proc.err_fd : w.beat_fd;
  }

  // Relays what an output pipe holds, or takes the heartbeats (bounded per call so that one
  // chatty worker cannot starve the rest).
  void read_stream(Worker& w, Stream s) {
    int& fd = fd_of(w, s);
    for (int round = 0; round < 16 && fd >= 0; ++round) {
      ssize_t n = ::read(fd, buf_.data(), buf_.size());
      if (n > 0) {
        if (s == Stream::kBeat) {
          w.beats.on_bytes(buf_.data(), static_cast<size_t>(n), Clock::now());
        } else {
          (s == Stream::kOut ? *w.out : *w.err)
              .feed(std::string_view(buf_.data(), static_cast<size_t>(n)));
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      // End of stream (or an error): the partial line goes out too.
      if (s == Stream::kOut) w.out->flush();
      if (s == Stream::kErr) w.err->flush();
      close_fd(fd);
    }
  }

  void on_signal(int sig) {
    if (phase_ == Phase::kRunning) {
      launcher_say("received " + signal_name(sig) + "; forwarding it to " +
                   std::to_string(running_) + " worker(s), SIGKILL after " +
                   seconds_text(o_.grace_s));
      interrupted(sig);
      begin_stop(sig);
    } else if (phase_ == Phase::kStopping) {
      launcher_say("received " + signal_name(sig) + " again; sending SIGKILL");
      interrupted(sig);
      begin_kill();
    }
  }

  // A signal to the launcher wins over a worker failure: the user asked to stop, so nothing
  // restarts.
  void interrupted(int sig) {
    if (outcome_.kind == GroupOutcome::Kind::kInterrupted) return;
    outcome_.kind = GroupOutcome::Kind::kInterrupted;
    outcome_.signal = sig;
  }

  void begin_stop(int sig) {
    phase_ = Phase::kStopping;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o_.grace_s));
    for (auto& w : workers_) {
      if (!w.running) continue;
      signal_group(w.proc.pid, sig);
      signal_group(w.proc.pid, SIGCONT);
    }
  }

  void begin_kill() {
    phase_ = Phase::kKilling;
    deadline_ = Clock::now() + kKillWait;
    for (auto& w : workers_) {
      if (w.running) signal_group(w.proc.pid, SIGKILL);
    }
  }

  bool droppable(const Worker& w) const {
    return o_.droppable_from_rank > 0 && w.rank >= o_.droppable_from_rank &&
           (o_.droppable_until_rank == 0 || w.rank < o_.droppable_until_rank);
  }

  // A droppable worker failed (launcher.h): the others go on, and it is started again while its
  // own restarts last (--max-restarts per worker), to rejoin.
  void worker_dropped(Worker& w, const std::string& how) {
    const int used = restarts_of_[w.rank];
    if (used >= o_.max_restarts) {
      launcher_say(
          "rank " + std::to_string(w.rank) + " " + how + "; it leaves the job, the " +
          std::to_string(running_) + " other process(es) go on" +
          (o_.max_restarts > 0 ? " (its " + std::to_string(used) + " restart(s) are used)" : ""));
      return;
    }
    restarts_of_[w.rank] = used + 1;
    launcher_say("rank " + std::to_string(w.rank) + " " + how + "; the other " +
                 std::to_string(running_) + " process(es) go on and it starts again (restart " +
                 std::to_string(used + 1) + " of " + std::to_string(o_.max_restarts) + ")");
    w.out->flush();
    w.err->flush();
    for (int* fd : {&w.proc.out_fd, &w.proc.err_fd, &w.beat_fd}) close_fd(*fd);
    w = spawn(*spec_, w.rank - o_.node_rank * o_.nproc);
    ++running_;
  }

  // The first failure of a running group: remember who and how, stop everybody.
  void worker_failed(const Worker& w, const std::string& how, int exit_code, bool hung) {
    failed(w.rank, how, exit_code, hung, running_ - (w.running ? 1 : 0));
  }

  void failed(int rank, const std::string& how, int exit_code, bool hung, int others) {
    held_.reset();
    outcome_.kind = GroupOutcome::Kind::kWorkerFailed;
    outcome_.rank = rank;
    outcome_.how = how;
    outcome_.exit_code = exit_code;
    outcome_.hung = hung;
    std::string rest = others == 0 ? ""
                                   : "; stopping the other " + std::to_string(others) +
                                         " worker(s) (SIGTERM, SIGKILL after " +
                                         seconds_text(o_.grace_s) + ")";
    launcher_say("rank " + std::to_string(rank) + " " + how + rest);
    begin_stop(SIGTERM);
  }

  // A worker's exit with kExitComm, held for kSettle (see the top of this file).
  struct HeldFailure {
    int rank;
    std::string how;
    Clock::time_point until;
  };

  void check_held_failure(bool everyone_ended) {
    if (held_ && phase_ == Phase::kRunning && (everyone_ended || Clock::now() >= held_->until)) {
      const HeldFailure h = *held_;
      failed(h.rank, h.how, kExitComm, false, running_);
    }
  }

  void reap() {
    while (true) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      pid_t pid = info.si_pid;
      Worker* w = nullptr;
      for (auto& c : workers_) {
        if (c.running && c.proc.pid == pid) w = &c;
      }
      // The zombie still holds its group id: whatever it left running in its group goes now.
      if (w) signal_group(pid, SIGKILL);
      int status = 0;
      if (::waitpid(pid, &status, 0) != pid) continue;
      if (!w) continue;  // an orphaned descendant that the subreaper inherited
      w->running = false;
      --running_;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && phase_ == Phase::kRunning) {
        std::string what = WIFSIGNALED(status) ? "was " : "exited with ";
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (droppable(*w)) {
          worker_dropped(*w, what + describe_wait_status(status));
        } else if (code != kExitComm) {
          worker_failed(*w, what + describe_wait_status(status), code, false);
        } else if (!held_) {
          held_ = HeldFailure{w->rank, what + describe_wait_status(status), Clock::now() + kSettle};
        }
      }
    }
  }

  // A worker that beat once and then fell silent for longer than the timeout is hung: it is
  // SIGKILLed at once (a stopped process would not act on SIGTERM, and a frozen one would not
  // within the grace period), and the group is stopped as for any failure.
  void check_heartbeats() {
    if (phase_ != Phase::kRunning || heartbeat_timeout_.count() <= 0) return;
    auto now = Clock::now();
    for (auto& w : workers_) {
      if (!w.running || w.hung || !w.beats.overdue(now, heartbeat_timeout_)) continue;
      // Take what the socket holds first: a beat may have arrived since the last poll.
      if (w.beat_fd >= 0) read_stream(w, Stream::kBeat);
      if (!w.beats.overdue(now, heartbeat_timeout_)) continue;
      double silent = std::chrono::duration<double>(now - w.beats.last_beat()).count();
      char text[32];
      std::snprintf(text, sizeof(text), "%.1f", silent);
      signal_group(w.proc.pid, SIGKILL);
      const std::string how = "sent no heartbeat for " + std::string(text) +
                              " s (--heartbeat-timeout " + seconds_text(o_.heartbeat_timeout_s) +
                              "); killed it (SIGKILL)";
      if (droppable(w)) {
        w.hung = true;  // reaped as a dropped worker (worker_dropped)
        launcher_say("rank " + std::to_string(w.rank) + " " + how);
        continue;
      }
      worker_failed(w, how, -1, true);
      return;
    }
  }

  void check_deadline() {
    if (phase_ == Phase::kRunning || running_ == 0 || Clock::now() < deadline_) return;
    if (phase_ == Phase::kStopping) {
      for (auto& w : workers_) {
        if (w.running) {
          launcher_say("rank " + std::to_string(w.rank) + " did not stop within " +
                       seconds_text(o_.grace_s) + "; sending SIGKILL");
        }
      }
      begin_kill();
    } else {
      for (auto& w : workers_) {
        if (w.running) {
          launcher_say("rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.proc.pid) +
                       ") did not exit after SIGKILL; giving up on it");
        }
      }
      outcome_.gave_up = true;
      if (outcome_.kind == GroupOutcome::Kind::kSucceeded) {
        outcome_.kind = GroupOutcome::Kind::kWorkerFailed;
      }
    }
  }

  // Kills descendants that escaped their worker's group, then relays what is left in the pipes.
  void finish() {
    std::vector<pid_t> groups;
    for (auto& w : workers_) groups.push_back(w.proc.pid);
    int escaped = kill_and_reap_children(Clock::now() + kOrphanWait, groups);
    if (escaped > 0) {
      launcher_say("killed " + std::to_string(escaped) +
                   " leftover process(es) that left their worker's process group");
    }
    for (auto& w : workers_) close_fd(w.beat_fd);
    auto drain_deadline = Clock::now() + kDrainWait;
    while (Clock::now() < drain_deadline) {
      bool open = false;
      for (auto& w : workers_) open = open || w.proc.out_fd >= 0 || w.proc.err_fd >= 0;
      if (!open) break;
      poll_once();
      // The workers are gone; a late SIGCHLD changes nothing, but a SIGINT now still means
      // that nothing may restart.
      while (int sig = signals_.next()) {
        if (sig != SIGCHLD) interrupted(sig);
      }
    }
    for (auto& w : workers_) {
      w.out->flush();
      w.err->flush();
    }
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  const std::chrono::milliseconds heartbeat_timeout_;
  std::unique_ptr<LiveTerminal> terminal_;  // when the launcher's stderr is a terminal
  std::vector<Worker> workers_;
  int running_ = 0;
  GroupOutcome outcome_;
  Phase phase_ = Phase::kRunning;
  Clock::time_point deadline_{};
  const GroupSpec* spec_ = nullptr;  // what start() ran, for restarting a dropped worker
  std::map<int, int> restarts_of_;   // rank -> restarts of that dropped worker so far
  std::optional<HeldFailure> held_;  // a lost peer's exit, waiting for its cause (kSettle)
  std::array<char, 65536> buf_{};
};

}  // namespace

SignalScope::SignalScope() {
  sigemptyset(&set_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set_, sig);
  ::sigprocmask(SIG_BLOCK, &set_, &old_mask_);
  fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) {
    int e = errno;
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    throw IoError(std::string("signalfd() for the launcher: ") + std::strerror(e));
  }
  // Writing to a closed stdout must not kill the launcher (and with it every worker).
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old_pipe_);
  // With SIGCHLD ignored the kernel would reap workers before we learn their status.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &old_chld_);
  set_child_subreaper(true);
}

SignalScope::~SignalScope() {
  set_child_subreaper(false);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  ::close(fd_);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

int SignalScope::next() {
  signalfd_siginfo info{};
  ssize_t n = ::read(fd_, &info, sizeof(info));
  return n == sizeof(info) ? static_cast<int>(info.ssi_signo) : 0;
}

GroupOutcome run_worker_group(const GroupSpec& spec, SignalScope& signals) {
  Supervisor supervisor(spec, signals);
  try {
    supervisor.start(spec);
  } catch (...) {
    supervisor.kill_all();
    throw;
  }
  return supervisor.run();
}

void launcher_say(const std::string& line) {
  std::string text = "brigade launch: " + line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

}  // namespace brigade
