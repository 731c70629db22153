#include "brigade/runtime/worker_command.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "brigade/base/error.h"

extern char** environ;

namespace brigade {

namespace {

// The file store folder of a single-node launch (runtime/process_group.h reads it).
constexpr const char* kStoreDirVar = "BRIGADE_STORE_DIR";

// The heartbeat variables name an fd of one particular agent; an inherited pair (a launch
// inside a worker) would point at the wrong one.
constexpr const char* kContractVars[] = {"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "BRIGADE_RUN_ID",
                                         "BRIGADE_STORE_TOKEN",
                                         "BRIGADE_HEARTBEAT_FD",
                                         "BRIGADE_HEARTBEAT_INTERVAL_MS"};

}  // namespace

// The executable and argv of a worker.
WorkerSpec worker_command(const LaunchOptions& o) {
  WorkerSpec spec;
  if (o.exec_raw) {
    spec.path = o.args[0];
    if (spec.path.find('/') == std::string::npos) {
      const char* path_var = std::getenv("PATH");
      std::string dirs = path_var ? path_var : "/usr/bin:/bin";
      spec.path.clear();
      for (size_t pos = 0; pos <= dirs.size();) {
        size_t colon = dirs.find(':', pos);
        if (colon == std::string::npos) colon = dirs.size();
        std::string dir = dirs.substr(pos, colon - pos);
        std::string candidate = (dir.empty() ? "." : dir) + "/" + o.args[0];
        if (::access(candidate.c_str(), X_OK) == 0) {
          spec.path = candidate;
          break;
        }
        pos = colon + 1;
      }
      if (spec.path.empty()) {
        throw ConfigError("--exec: worker command '" + o.args[0] + "' is not found in PATH");
      }
    } else if (::access(spec.path.c_str(), X_OK) != 0) {
      throw ConfigError("--exec: worker command '" + spec.path +
                        "' is not an executable file: " + std::strerror(errno));
    }
    spec.argv = o.args;
  } else {
    // /proc/self/exe names this very binary even if the file was replaced since it started.
    spec.path = "/proc/self/exe";
    std::array<char, 4096> buf{};
    ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    spec.argv.push_back(n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : "brigade");
    spec.argv.insert(spec.argv.end(), o.args.begin(), o.args.end());
  }
  return spec;
}

// This process's environment without the contract variables, which every worker gets anew.
std::vector<std::string> inherited_env() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    bool ours = false;
    for (const char* name : kContractVars) {
      size_t len = std::strlen(name);
      if (entry.compare(0, len, name) == 0 && entry.size() > len && entry[len] == '=') ours = true;
    }
    if (!ours) env.push_back(std::move(entry));
  }
  return env;
}

std::vector<std::string> worker_env(const std::vector<std::string>& base, const LaunchOptions& o,
                                    const LaunchContract& contract, int local_rank) {
  std::vector<std::string> env;
  env.reserve(base.size() + 8);
  for (const auto& entry : base) {
    if (!contract.store_dir.empty() && entry.rfind(kStoreDirVar + std::string("="), 0) == 0) {
      continue;
    }
    env.push_back(entry);
  }
  env.push_back("RANK=" + std::to_string(o.node_rank * o.nproc + local_rank));
  env.push_back("WORLD_SIZE=" + std::to_string(o.nnodes * o.nproc));
  env.push_back("LOCAL_RANK=" + std::to_string(local_rank));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc));
  env.push_back("MASTER_ADDR=" + o.master_addr);
  env.push_back("MASTER_PORT=" + std::to_string(contract.master_port));
  env.push_back("BRIGADE_RUN_ID=" + contract.run_id);
  if (!contract.store_dir.empty()) {
    env.push_back(kStoreDirVar + std::string("=") + contract.store_dir);
  }
  // Only through the environment: /proc/<pid>/environ is readable by this user alone, while
  // argv (ps) is readable by everyone.
  if (!contract.store_token.empty()) env.push_back("BRIGADE_STORE_TOKEN=" + contract.store_token);
  return env;
}

std::string make_store_dir(const std::string& run_id) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/brigade-store-" + run_id + "-XXXXXX";
  // mkdtemp creates the folder 0700 under a name nobody could guess or take first: on one node
  // these permissions are the store's authentication (a file store needs no token).
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw IoError("creating the workers' store folder " + pattern + ": " + std::strerror(errno));
  }
  return pattern;
}

}  // namespace brigade
