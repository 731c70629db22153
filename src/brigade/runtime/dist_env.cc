// Reading the job layout from the environment. Each source is a table of variable names; the
// values go through one validator so that every engine gets the same checks and messages.
#include "brigade/runtime/dist_env.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>

#include "brigade/base/error.h"

extern char** environ;

namespace brigade {

namespace {

std::optional<std::string> get(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

[[noreturn]] void bad(const std::string& name, const std::string& value, const std::string& why) {
  throw ConfigError("environment variable " + name + "='" + value + "' " + why);
}

// A decimal integer in [lo, hi], nothing else (no sign games, spaces or trailing text).
int parse_int(const std::string& name, const std::string& value, long lo, long hi) {
  if (value.empty()) bad(name, value, "is empty; expected an integer");
  for (char c : value) {
    if (c < '0' || c > '9') bad(name, value, "is not a non-negative integer");
  }
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || v < lo || v > hi) {
    bad(name, value, "is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int>(v);
}

int require_int(const EnvMap& env, const std::string& name, long lo, long hi,
                const std::string& source) {
  auto v = get(env, name);
  if (!v) throw ConfigError("environment variable " + name + " is not set (" + source + ")");
  return parse_int(name, *v, lo, hi);
}

int optional_int(const EnvMap& env, const std::string& name, long lo, long hi, int fallback) {
  auto v = get(env, name);
  return v ? parse_int(name, *v, lo, hi) : fallback;
}

constexpr long kMaxInt = std::numeric_limits<int>::max();

// Variable names of one source, for messages: a failed cross-check names both variables.
struct Names {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

void check_layout(const DistEnv& d, const EnvMap& env, const Names& n) {
  auto value = [&](const char* name) { return get(env, name).value_or("(unset)"); };
  if (d.rank >= d.world_size) {
    bad(n.rank, value(n.rank),
        "must be less than " + std::string(n.world) + "=" + std::to_string(d.world_size));
  }
  if (d.local_world_size > d.world_size) {
    bad(n.local_world, value(n.local_world),
        "must be at most " + std::string(n.world) + "=" + std::to_string(d.world_size));
  }
  if (d.local_rank >= d.local_world_size) {
    bad(n.local_rank, value(n.local_rank),
        "must be less than " + std::string(n.local_world) + "=" +
            std::to_string(d.local_world_size));
  }
}

std::string master_addr_from(const EnvMap& env, const char* name) {
  auto v = get(env, name);
  if (v && v->empty()) bad(name, *v, "is empty; expected a host name or address");
  return v ? *v : std::string();
}

DistEnv from_torchrun(const EnvMap& env) {
  const std::string src = "torchrun-style variables: RANK and WORLD_SIZE go together";
  DistEnv d;
  d.source = "torchrun";
  d.world_size = require_int(env, "WORLD_SIZE", 1, kMaxInt, src);
  d.rank = require_int(env, "RANK", 0, kMaxInt, src);
  // One process per machine (a Kubernetes pod) often gets no LOCAL_* variables.
  d.local_rank = optional_int(env, "LOCAL_RANK", 0, kMaxInt, 0);
  d.local_world_size = optional_int(env, "LOCAL_WORLD_SIZE", 1, kMaxInt, 1);
  check_layout(d, env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  // Guessing a master for a multi-process job would hang it; torchrun always sets both.
  d.master_addr = master_addr_from(env, "MASTER_ADDR");
  if (d.master_addr.empty()) {
    if (d.world_size > 1) {
      throw ConfigError("environment variable MASTER_ADDR is not set (needed with WORLD_SIZE=" +
                        std::to_string(d.world_size) + ")");
    }
    d.master_addr = "127.0.0.1";
  }
  if (d.world_size > 1 && !get(env, "MASTER_PORT")) {
    throw ConfigError("environment variable MASTER_PORT is not set (needed with WORLD_SIZE=" +
                      std::to_string(d.world_size) + ")");
  }
  d.master_port = optional_int(env, "MASTER_PORT", 1, 65535, kDefaultMasterPort);
  // Under torchrun's agent store, the agent itself serves a torch TCPStore on MASTER_PORT, which
  // brigade's store cannot share: rank 0 serves brigade's on the next port (as PyTorch's own
  // side process groups do), the same for every rank since every rank sees the same variables.
  const std::string agent_store = get(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("");
  if (agent_store == "True" || agent_store == "true" || agent_store == "1") {
    if (d.master_port == 65535) {
      throw ConfigError(
          "MASTER_PORT = 65535 with TORCHELASTIC_USE_AGENT_STORE: brigade's store takes "
          "MASTER_PORT + 1, past the last port; give torchrun a lower --master-port");
    }
    d.master_port += 1;
    d.source = "torchrun (agent store; brigade's store on MASTER_PORT + 1)";
  }
  return d;
}

DistEnv from_openmpi(const EnvMap& env) {
  const std::string src = "Open MPI variables";
  DistEnv d;
  d.source = "openmpi";
  d.world_size = require_int(env, "OMPI_COMM_WORLD_SIZE", 1, kMaxInt, src);
  d.rank = require_int(env, "OMPI_COMM_WORLD_RANK", 0, kMaxInt, src);
  d.local_rank = require_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxInt, src);
  d.local_world_size = require_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, kMaxInt, src);
  check_layout(d, env,
               {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE"});
  d.master_addr = master_addr_from(env, "MASTER_ADDR");
  if (d.master_addr.empty()) d.master_addr = "127.0.0.1";
  d.master_port = optional_int(env, "MASTER_PORT", 1, 65535, kDefaultMasterPort);
  return d;
}

// Slurm writes tasks per node compressed: "2(x3),1" is 2,2,2,1. Returns the count of node
// `node`, or 0 when the list has fewer nodes.
int tasks_on_node(const std::string& name, const std::string& list, int node) {
  size_t pos = 0;
  long seen = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
    pos = comma == std::string::npos ? list.size() : comma + 1;
    std::string count = item;
    long repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') bad(name, list, "is not a Slurm task list like 2(x3),1");
      count = item.substr(0, paren);
      repeat = parse_int(name, item.substr(paren + 2, item.size() - paren - 3), 1, kMaxInt);
    }
    int tasks = parse_int(name, count, 1, kMaxInt);
    if (node < seen + repeat) return tasks;
    seen += repeat;
  }
  return 0;
}

DistEnv from_slurm(const EnvMap& env) {
  const std::string src = "Slurm variables";
  DistEnv d;
  d.source = "slurm";
  d.world_size = require_int(env, "SLURM_NTASKS", 1, kMaxInt, src);
  d.rank = require_int(env, "SLURM_PROCID", 0, kMaxInt, src);
  d.local_rank = require_int(env, "SLURM_LOCALID", 0, kMaxInt, src);
  // srun sets the step's list; the job's list is the fallback for older versions.
  const char* list_name =
      get(env, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  auto list = get(env, list_name);
  const char* local_world_name = list_name;
  if (list) {
    int node = optional_int(env, "SLURM_NODEID", 0, kMaxInt, 0);
    d.local_world_size = tasks_on_node(list_name, *list, node);
    if (d.local_world_size == 0) {
      bad(list_name, *list, "has no entry for SLURM_NODEID=" + std::to_string(node));
    }
  } else {
    // Without a task list the node's share is unknown; the whole job is an upper bound.
    d.local_world_size = d.world_size;
    local_world_name = "SLURM_NTASKS";
  }
  check_layout(d, env, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", local_world_name});
  d.master_addr = master_addr_from(env, "MASTER_ADDR");
  if (d.master_addr.empty()) d.master_addr = master_addr_from(env, "SLURM_LAUNCH_NODE_IPADDR");
  if (d.master_addr.empty()) {
    if (d.world_size > 1) {
      throw ConfigError(
          "neither MASTER_ADDR nor SLURM_LAUNCH_NODE_IPADDR is set; export MASTER_ADDR to the "
          "host of rank 0");
    }
    d.master_addr = "127.0.0.1";
  }
  d.master_port = optional_int(env, "MASTER_PORT", 1, 65535, kDefaultMasterPort);
  return d;
}

}  // namespace

DistEnv detect_dist_env(const EnvMap& env) {
  if (get(env, "RANK") || get(env, "WORLD_SIZE")) return from_torchrun(env);
  if (get(env, "OMPI_COMM_WORLD_RANK") || get(env, "OMPI_COMM_WORLD_SIZE")) {
    return from_openmpi(env);
  }
  if (get(env, "SLURM_PROCID")) return from_slurm(env);
  return DistEnv{};
}

DistEnv detect_dist_env() {
  return detect_dist_env(current_env());
}

EnvMap current_env() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace brigade
