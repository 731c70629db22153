#pragma once
// Starting one worker process for the launcher, and the process-table chores around it.
//
// A worker leads its own process group (so that kill(-pid) reaches the children it starts)
// and carries PR_SET_PDEATHSIG=SIGKILL (so that it dies with the launcher even when the
// launcher is SIGKILLed). The launcher becomes a child subreaper, so descendants that outlive
// their worker are reparented to it and can be found, killed and reaped at the end.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace brigade {

struct WorkerSpec {
  std::string path;               // the executable
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // the complete environment, "NAME=value" each
  int keep_fd = -1;  // a close-on-exec fd (>= 3) of the launcher that the worker keeps open,
                     // at the same number (its heartbeat socket); -1: none
};

struct WorkerProcess {
  pid_t pid = -1;   // also the id of its process group
  int out_fd = -1;  // read ends of its stdout and stderr pipes (non-blocking, close-on-exec)
  int err_fd = -1;
};

// Forks and execs `spec` with stdin from /dev/null, an empty signal mask and SIGTERM/SIGPIPE/
// SIGCHLD at their defaults. If exec fails, the worker prints why on its stderr and exits 127.
// Throws IoError if the pipes or the fork cannot be made.
WorkerProcess spawn_worker(const WorkerSpec& spec);

// kill(-pgid, sig), ignoring a group that no longer exists.
void signal_group(pid_t pgid, int sig);

// "exit code 3" or "killed by SIGKILL", from a wait status.
std::string describe_wait_status(int status);

// "SIGTERM" for SIGTERM, "signal 77" for a number without a name.
std::string signal_name(int sig);

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER).
void set_child_subreaper(bool on);

// The pids whose parent is this process, read from /proc/*/stat.
std::vector<pid_t> list_children();

// SIGKILLs and reaps every remaining child of this process until none is left or `deadline`
// passes. Returns how many of the killed children were outside `known_groups` (process group
// ids already signalled as a whole): descendants that escaped their worker's group.
int kill_and_reap_children(std::chrono::steady_clock::time_point deadline,
                           const std::vector<pid_t>& known_groups = {});

}  // namespace brigade
