#pragma once
// Runs a shell command for a test, bounded in time by coreutils `timeout`, and returns its
// exit code and combined output.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace brigade::testing {

struct CommandResult {
  int exit_code = -1;  // 124 when the time limit killed it
  std::string output;
};

inline CommandResult run_command(const std::string& command, int timeout_s = 300) {
  CommandResult r;
  std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " " + command + " 2>&1";
  std::FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The brigade command line `args` (a subcommand and its arguments) as a user runs it, alone, or
// under `brigade launch --nproc N` when nproc > 1.
inline CommandResult run_brigade(const std::string& args, int nproc = 1, int timeout_s = 180) {
  const std::string bin = BRIGADE_BINARY;
  return run_command(nproc == 1 ? bin + " " + args
                                : bin + " launch --nproc " + std::to_string(nproc) + " -- " + args,
                     timeout_s);
}

// A fresh empty directory under the build's test-tmp folder.
inline std::string make_temp_dir(const std::string& tag) {
  std::string base = std::string(BRIGADE_TEST_TMP);
  std::system(("mkdir -p '" + base + "'").c_str());
  std::string pattern = base + "/" + tag + "-XXXXXX";
  char* dir = mkdtemp(pattern.data());
  return dir ? std::string(dir) : std::string();
}

}  // namespace brigade::testing
