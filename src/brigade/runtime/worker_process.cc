#include "brigade/runtime/worker_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "brigade/base/error.h"

namespace brigade {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Async-signal-safe: used between fork and exec.
void write_str(int fd, const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_int(int fd, int v) {
  char buf[16];
  int i = sizeof(buf) - 1;
  buf[i] = '\0';
  bool neg = v < 0;
  unsigned u = neg ? 0u - static_cast<unsigned>(v) : static_cast<unsigned>(v);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (neg) buf[--i] = '-';
  write_str(fd, buf + i);
}

[[noreturn]] void child_fail(const char* what, const char* path) {
  int err = errno;
  write_str(2, "brigade launch: ");
  write_str(2, what);
  write_str(2, " '");
  write_str(2, path);
  write_str(2, "' failed (errno ");
  write_int(2, err);
  write_str(2, ")\n");
  ::_exit(127);
}

}  // namespace

WorkerProcess spawn_worker(const WorkerSpec& spec) {
  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls are allowed.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close_fd(devnull);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) close_fd(*fd);
    throw IoError(std::string("creating pipes for a worker: ") + ::strerror(e));
  }
  const int keep_fd = spec.keep_fd;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_fd(devnull);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) close_fd(*fd);
    throw IoError(std::string("fork() of a worker: ") + ::strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The launcher may have died before the line above; then nobody would kill us.
    if (::getppid() != parent) ::_exit(127);
    if (::dup2(devnull, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) ::_exit(127);
    if (keep_fd >= 3 && ::fcntl(keep_fd, F_SETFD, 0) != 0) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Ignored signals survive exec: the launcher ignores SIGPIPE, and a launcher started from a
    // script in the background inherits SIGINT and SIGQUIT (and under nohup SIGHUP) ignored. A
    // worker starts with every disposition at its default, as a process of its own would.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL: skipped
    }
    ::execve(spec.path.c_str(), argv.data(), envp.data());
    child_fail("exec of", spec.path.c_str());
  }
  // Also set here: whichever of parent and child runs first, the group exists before the
  // launcher may signal it.
  ::setpgid(pid, pid);
  close_fd(devnull);
  close_fd(out[1]);
  close_fd(err[1]);
  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return WorkerProcess{.pid = pid, .out_fd = out[0], .err_fd = err[0]};
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

void set_child_subreaper(bool on) {
  ::prctl(PR_SET_CHILD_SUBREAPER, on ? 1 : 0);
}

std::vector<pid_t> list_children() {
  std::vector<pid_t> children;
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;  // it exited meanwhile
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the
    // last ')'.
    size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == self) children.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return children;
}

int kill_and_reap_children(std::chrono::steady_clock::time_point deadline,
                           const std::vector<pid_t>& known_groups) {
  std::set<pid_t> escaped;
  while (true) {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    }
    if (pid < 0 && errno == ECHILD) break;  // no child left at all
    if (std::chrono::steady_clock::now() >= deadline) break;
    for (pid_t child : list_children()) {
      pid_t group = ::getpgid(child);
      if (::kill(child, SIGKILL) == 0 && group > 0 &&
          std::find(known_groups.begin(), known_groups.end(), group) == known_groups.end()) {
        escaped.insert(child);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return static_cast<int>(escaped.size());
}

}  // namespace brigade
