#pragma once
// One group of workers of `brigade launch`, from spawn to the last reaped process: the
// supervision loop that launcher.cc runs once per attempt (the first start and each restart).
// It starts the workers, relays their output, watches their exits and heartbeats, forwards the
// launcher's signals, and on the first failure stops the whole group (SIGTERM, SIGKILL after
// the grace period); it reports what ended the group and leaves the decision to restart to the
// caller (launcher_policy.h).
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "brigade/runtime/launcher.h"
#include "brigade/runtime/worker_command.h"

namespace brigade {

// Signals the launcher handles itself (SIGINT, SIGTERM, SIGHUP, SIGCHLD), blocked and read from
// a signalfd for as long as this lives, which spans every attempt of a launch so that no signal
// is lost between a group's end and the next start. Also ignores SIGPIPE and makes the process a
// child subreaper; the destructor restores all of it. Throws IoError if signalfd() fails.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  int fd() const { return fd_; }
  int next();  // the next pending signal, or 0

 private:
  sigset_t set_{}, old_mask_{};
  struct sigaction old_pipe_ = {};
  struct sigaction old_chld_ = {};
  int fd_ = -1;
};

// What one group of workers runs.
struct GroupSpec {
  WorkerSpec command;                 // executable and argv (env filled per worker)
  std::vector<std::string> base_env;  // inherited_env()
  LaunchOptions options;              // nproc = this group's size
  LaunchContract contract;            // this attempt's run id, port, store folder
};

// How a group ended.
struct GroupOutcome {
  enum class Kind {
    kSucceeded,     // every worker exited 0
    kWorkerFailed,  // a worker failed (exit, signal or missed heartbeats); the rest were stopped
    kInterrupted,   // the launcher received a signal and passed it on
  };
  Kind kind = Kind::kSucceeded;
  int rank = -1;       // kWorkerFailed: the worker whose failure stopped the group
  std::string how;     // "exited with exit code 3", "was killed by SIGKILL", "sent no heartbeat..."
  int exit_code = -1;  // kWorkerFailed by exit: its exit code; else -1
  bool hung = false;   // kWorkerFailed by missed heartbeats
  int signal = 0;      // kInterrupted: the signal
  bool gave_up = false;  // a worker outlived SIGKILL (stuck in the kernel); nothing may restart
};

// Starts spec.options.nproc workers and supervises them until all are reaped (or one outlived
// SIGKILL by kKillWait). Throws IoError when workers cannot be started (those already started
// are killed and reaped first).
GroupOutcome run_worker_group(const GroupSpec& spec, SignalScope& signals);

// "brigade launch: <line>" on stderr.
void launcher_say(const std::string& line);

// "5 s", "0.5 s".
std::string seconds_text(double s);

}  // namespace brigade
