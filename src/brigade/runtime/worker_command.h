#pragma once
// What a launcher worker runs: the executable, its argv and its environment (the torchrun
// contract of runtime/launcher.h on top of the launcher's own environment).
#include <string>
#include <vector>

#include "brigade/runtime/launcher.h"
#include "brigade/runtime/worker_process.h"

namespace brigade {

// The executable and argv shared by all workers: with exec_raw, args[0] (looked up in PATH
// when it has no '/'), else this binary (/proc/self/exe) with args as its subcommand. The
// env field is left empty. Throws ConfigError when args[0] is not an executable file.
WorkerSpec worker_command(const LaunchOptions& options);

// The environment of this process without the contract variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, BRIGADE_RUN_ID, BRIGADE_STORE_TOKEN,
// and the heartbeat variables of runtime/heartbeat.h).
std::vector<std::string> inherited_env();

// What all workers of one launch share.
struct LaunchContract {
  int master_port = 0;
  std::string run_id;       // BRIGADE_RUN_ID
  std::string store_dir;    // BRIGADE_STORE_DIR; empty: not set by the launcher
  std::string store_token;  // BRIGADE_STORE_TOKEN; a secret: goes into the environment only
};

// `base` plus the contract variables of local worker `local_rank`. A store_dir replaces any
// BRIGADE_STORE_DIR in `base`.
std::vector<std::string> worker_env(const std::vector<std::string>& base,
                                    const LaunchOptions& options, const LaunchContract& contract,
                                    int local_rank);

// Creates a fresh, private (0700) folder for the workers' file store, named after the run id,
// under $TMPDIR or /tmp. Throws IoError naming the path.
std::string make_store_dir(const std::string& run_id);

}  // namespace brigade
