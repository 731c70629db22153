// The launcher's supervision loop. One thread watches everything through poll(): a signalfd
// for SIGINT/SIGTERM/SIGHUP/SIGCHLD (blocked, so they arrive only there) and the stdout/stderr
// pipes of every worker, with a timeout of at most kTick so deadlines are checked even when
// nothing happens. A worker that ended is first peeked at with waitid(WNOWAIT): while it is
// an unreaped zombie its pid cannot be reused, so killing its process group then cannot hit a
// stranger; only after that is it reaped.
//
// Phases: running -> stopping (SIGTERM or the forwarded signal sent, grace period running)
//         -> killing (SIGKILL sent, kKillWait to die) -> done.
#include "brigade/runtime/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "brigade/base/error.h"
#include "brigade/runtime/host_port.h"
#include "brigade/runtime/line_relay.h"
#include "brigade/runtime/worker_command.h"
#include "brigade/runtime/worker_process.h"

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kKillWait = std::chrono::seconds(10);   // SIGKILL to exit, unless stuck in D
constexpr auto kOrphanWait = std::chrono::seconds(3);  // killing escaped descendants
constexpr auto kDrainWait = std::chrono::seconds(1);   // reading what is left in the pipes

void say(const std::string& line) {
  std::string text = "brigade launch: " + line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

// Writes all of `bytes` to fd; a closed reader (EPIPE) just drops the output.
void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Signals the launcher handles itself; blocked and read from a signalfd while it runs. The
// guard restores the signal mask, SIGPIPE/SIGCHLD handling and the subreaper flag.
class SignalScope {
 public:
  SignalScope() {
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
  ~SignalScope() {
    set_child_subreaper(false);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  int fd() const { return fd_; }

  // The next pending signal, or 0.
  int next() {
    signalfd_siginfo info{};
    ssize_t n = ::read(fd_, &info, sizeof(info));
    return n == sizeof(info) ? static_cast<int>(info.ssi_signo) : 0;
  }

 private:
  sigset_t set_{}, old_mask_{};
  struct sigaction old_pipe_ = {};
  struct sigaction old_chld_ = {};
  int fd_ = -1;
};

struct Worker {
  int rank = 0;
  WorkerProcess proc;
  bool running = true;
  std::unique_ptr<LineRelay> out, err;
};

// Removes the workers' store folder when the launch ends; declared before the Supervisor, it
// outlives every worker.
struct StoreDirGuard {
  std::string dir;
  ~StoreDirGuard() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalScope& signals) : o_(o), signals_(signals) {}

  ~Supervisor() {
    for (auto& w : workers_) {
      for (int* fd : {&w.proc.out_fd, &w.proc.err_fd}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    }
  }

  void start(const WorkerSpec& command, const std::vector<std::string>& base_env,
             const LaunchContract& contract) {
    for (int local = 0; local < o_.nproc; ++local) {
      WorkerSpec spec = command;
      int rank = o_.node_rank * o_.nproc + local;
      spec.env = worker_env(base_env, o_, contract, local);
      Worker w;
      w.rank = rank;
      w.proc = spawn_worker(spec);  // on IoError, launch() kills the ones already started
      w.out = std::make_unique<LineRelay>(rank, [](std::string_view s) { write_all(1, s); });
      w.err = std::make_unique<LineRelay>(rank, [](std::string_view s) { write_all(2, s); });
      workers_.push_back(std::move(w));
      ++running_;
    }
  }

  // Supervises until every worker is reaped (or SIGKILL failed to end one), then clears up.
  int run() {
    while (running_ > 0 && !gave_up_) {
      poll_once();
      while (int sig = signals_.next()) {
        if (sig != SIGCHLD) on_signal(sig);
      }
      reap();
      check_deadline();
    }
    finish();
    return result_;
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
    std::vector<std::pair<Worker*, bool>> owners{{nullptr, false}};
    for (auto& w : workers_) {
      for (bool is_out : {true, false}) {
        int fd = is_out ? w.proc.out_fd : w.proc.err_fd;
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        owners.push_back({&w, is_out});
      }
    }
    auto timeout = kTick;
    if (phase_ != Phase::kRunning) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      timeout =
          std::clamp(left + std::chrono::milliseconds(1), std::chrono::milliseconds(0), kTick);
    }
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (n <= 0) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_pipe(*owners[i].first, owners[i].second);
    }
  }

  // Relays what the pipe holds (bounded per call so one chatty worker cannot starve the rest).
  void read_pipe(Worker& w, bool is_out) {
    int& fd = is_out ? w.proc.out_fd : w.proc.err_fd;
    LineRelay& relay = is_out ? *w.out : *w.err;
    for (int round = 0; round < 16 && fd >= 0; ++round) {
      ssize_t n = ::read(fd, buf_.data(), buf_.size());
      if (n > 0) {
        relay.feed(std::string_view(buf_.data(), static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      relay.flush();  // end of stream (or an error): the partial line goes out too
      ::close(fd);
      fd = -1;
    }
  }

  void on_signal(int sig) {
    if (phase_ == Phase::kRunning) {
      say("received " + signal_name(sig) + "; forwarding it to " + std::to_string(running_) +
          " worker(s), SIGKILL after " + seconds_text(o_.grace_s));
      if (result_ == 0) result_ = 128 + sig;
      begin_stop(sig);
    } else if (phase_ == Phase::kStopping) {
      say("received " + signal_name(sig) + " again; sending SIGKILL");
      if (result_ == 0) result_ = 128 + sig;
      begin_kill();
    }
  }

  void begin_stop(int sig) {
    phase_ = Phase::kStopping;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o_.grace_s));
    for (auto& w : workers_) {
      if (w.running) signal_group(w.proc.pid, sig);
    }
  }

  void begin_kill() {
    phase_ = Phase::kKilling;
    deadline_ = Clock::now() + kKillWait;
    for (auto& w : workers_) {
      if (w.running) signal_group(w.proc.pid, SIGKILL);
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
        std::string rest = running_ == 0 ? ""
                                         : "; stopping the other " + std::to_string(running_) +
                                               " worker(s) (SIGTERM, SIGKILL after " +
                                               seconds_text(o_.grace_s) + ")";
        say("rank " + std::to_string(w->rank) + " " + what + describe_wait_status(status) + rest);
        result_ = kExitWorkerFailed;
        begin_stop(SIGTERM);
      }
    }
  }

  void check_deadline() {
    if (phase_ == Phase::kRunning || running_ == 0 || Clock::now() < deadline_) return;
    if (phase_ == Phase::kStopping) {
      for (auto& w : workers_) {
        if (w.running) {
          say("rank " + std::to_string(w.rank) + " did not stop within " +
              seconds_text(o_.grace_s) + "; sending SIGKILL");
        }
      }
      begin_kill();
    } else {
      for (auto& w : workers_) {
        if (w.running) {
          say("rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.proc.pid) +
              ") did not exit after SIGKILL; giving up on it");
        }
      }
      gave_up_ = true;
      if (result_ == 0) result_ = kExitWorkerFailed;
    }
  }

  // Kills descendants that escaped their worker's group, then relays what is left in the pipes.
  void finish() {
    std::vector<pid_t> groups;
    for (auto& w : workers_) groups.push_back(w.proc.pid);
    int escaped = kill_and_reap_children(Clock::now() + kOrphanWait, groups);
    if (escaped > 0) {
      say("killed " + std::to_string(escaped) +
          " leftover process(es) that left their worker's process group");
    }
    auto drain_deadline = Clock::now() + kDrainWait;
    while (Clock::now() < drain_deadline) {
      bool open = false;
      for (auto& w : workers_) open = open || w.proc.out_fd >= 0 || w.proc.err_fd >= 0;
      if (!open) break;
      poll_once();
      while (signals_.next() != 0) {
      }  // the workers are gone; a late signal changes nothing
    }
    for (auto& w : workers_) {
      w.out->flush();
      w.err->flush();
    }
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  std::vector<Worker> workers_;
  int running_ = 0;
  int result_ = 0;
  bool gave_up_ = false;
  Phase phase_ = Phase::kRunning;
  Clock::time_point deadline_{};
  std::array<char, 65536> buf_{};
};

}  // namespace

int launch(const LaunchOptions& options) {
  options.validate();
  WorkerSpec command = worker_command(options);
  LaunchContract contract;
  contract.master_port = options.master_port != 0 ? options.master_port : pick_free_port();
  contract.run_id = options.run_id.empty() ? make_run_id() : options.run_id;
  int first = options.node_rank * options.nproc;
  say(std::to_string(options.nproc) + " worker(s), ranks " + std::to_string(first) + "-" +
      std::to_string(first + options.nproc - 1) + " of " +
      std::to_string(options.nnodes * options.nproc) + ", master " + options.master_addr + ":" +
      std::to_string(contract.master_port) + ", run id " + contract.run_id);
  // One node: the workers can rendezvous through a folder, which needs no port.
  StoreDirGuard store_dir;
  if (options.nnodes == 1) contract.store_dir = store_dir.dir = make_store_dir(contract.run_id);
  std::fflush(stdout);  // nothing buffered may be duplicated into the children by fork()

  SignalScope signals;
  Supervisor supervisor(options, signals);
  try {
    supervisor.start(command, inherited_env(), contract);
  } catch (...) {
    supervisor.kill_all();
    throw;
  }
  return supervisor.run();
}

}  // namespace brigade
