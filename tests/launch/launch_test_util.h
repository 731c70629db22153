#pragma once
// Helpers for tests that run `brigade launch` as a real process: start it in the background
// with its stdout/stderr in files, wait for it with a deadline, and look through /proc for
// processes that still carry a launch's BRIGADE_RUN_ID.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace brigade::testing {

using Clock = std::chrono::steady_clock;

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Waits until `path` exists, at most timeout_s seconds.
inline bool wait_for_file(const std::string& path, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (::access(path.c_str(), F_OK) != 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Pids of live processes whose environment holds exactly `entry` ("NAME=value"). Zombies
// have no readable environment and are not listed.
inline std::vector<pid_t> processes_with_env(const std::string& entry) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::string env = read_text("/proc/" + std::string(e->d_name) + "/environ");
    size_t pos = 0;
    while (pos < env.size()) {
      size_t nul = env.find('\0', pos);
      if (nul == std::string::npos) nul = env.size();
      if (env.compare(pos, nul - pos, entry) == 0) {
        found.push_back(static_cast<pid_t>(pid));
        break;
      }
      pos = nul + 1;
    }
  }
  ::closedir(proc);
  return found;
}

// The environment of process `pid` as "NAME=value" entries (empty for a zombie or a process
// that is gone).
inline std::vector<std::string> environment_of(pid_t pid) {
  std::string env = read_text("/proc/" + std::to_string(pid) + "/environ");
  std::vector<std::string> entries;
  for (size_t pos = 0; pos < env.size();) {
    size_t nul = env.find('\0', pos);
    if (nul == std::string::npos) nul = env.size();
    entries.push_back(env.substr(pos, nul - pos));
    pos = nul + 1;
  }
  return entries;
}

// Pids of live processes whose BRIGADE_RUN_ID starts with `run_id` (an elastic launch gives
// restart k the id "<run_id>.r<k>") and, when rank >= 0, whose RANK is `rank`.
inline std::vector<pid_t> processes_of_launch(const std::string& run_id, int rank = -1) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    bool ours = false, rank_ok = rank < 0;
    for (const auto& entry : environment_of(static_cast<pid_t>(pid))) {
      ours = ours || entry == "BRIGADE_RUN_ID=" + run_id ||
             entry.rfind("BRIGADE_RUN_ID=" + run_id + ".r", 0) == 0;
      rank_ok = rank_ok || entry == "RANK=" + std::to_string(rank);
    }
    if (ours && rank_ok) found.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return found;
}

// `brigade <args>` running in the background; stdout and stderr go to files in `dir`, and
// `extra_env` ("NAME=value") is added to (or replaces in) this process's environment.
class BackgroundBrigade {
 public:
  BackgroundBrigade(const std::vector<std::string>& args, const std::string& dir,
                    const std::vector<std::string>& extra_env = {})
      : out_path_(dir + "/launcher.out"), err_path_(dir + "/launcher.err") {
    std::vector<std::string> argv_s{BRIGADE_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : extra_env) env_.push_back(e);
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) {
      std::string entry(*e);
      bool replaced = false;
      for (auto& x : env_)
        replaced = replaced || entry.substr(0, entry.find('=')) == x.substr(0, x.find('='));
      if (!replaced) envp.push_back(*e);
    }
    for (auto& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();
    start_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a crashed test takes its launcher along
      if (::getppid() != parent) ::_exit(126);
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~BackgroundBrigade() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  // The exit code (128 + signal if killed), or -1 if it was still running after timeout_s
  // (it is SIGKILLed then).
  int wait(double timeout_s) {
    auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        elapsed_s_ = std::chrono::duration<double>(Clock::now() - start_).count();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        exited_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Seconds from start to exit, as seen by wait().
  double elapsed_s() const { return elapsed_s_; }
  std::string out() const { return read_text(out_path_); }
  std::string err() const { return read_text(err_path_); }

 private:
  std::string out_path_, err_path_;
  std::vector<std::string> env_;
  pid_t pid_ = -1;
  bool exited_ = false;
  Clock::time_point start_;
  double elapsed_s_ = 0;
};

}  // namespace brigade::testing
