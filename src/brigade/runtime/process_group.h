#pragma once
// Joins this process to the job it belongs to: finds its place from the environment the
// launcher set (dist_env.h), opens the rendezvous store and connects the world communicator.
#include <memory>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/communicator.h"
#include "brigade/comm/store.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/dist_env.h"

namespace brigade {

struct ProcessGroup {
  DistEnv env;
  CommOptions world_options;            // what created `world` (sub-groups derive from it)
  std::unique_ptr<Communicator> world;  // null for a single process
  int rank() const { return env.rank; }
  int size() const { return env.world_size; }
};

// Environment variable through which `brigade launch` hands its workers a file store folder.
inline constexpr const char* kStoreDirEnv = "BRIGADE_STORE_DIR";

// Single process: no store, no communicator. Otherwise the store comm.store selects and a
// connected world communicator. Throws ConfigError for an unusable choice (naming the key),
// CommError when peers do not join within comm.timeout_s.
ProcessGroup join_process_group(const CommConfig& comm, const DistEnv& env);

}  // namespace brigade
