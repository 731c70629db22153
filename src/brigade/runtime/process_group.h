#pragma once
// Joins this process to the job it belongs to: finds its place from the environment the
// launcher set (dist_env.h), opens the rendezvous store and connects the world communicator.
#include <memory>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/communicator.h"
#include "brigade/comm/store.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/dist_env.h"
#include "brigade/runtime/heartbeat.h"

namespace brigade {

struct ProcessGroup {
  DistEnv env;
  CommOptions world_options;            // what created `world` (sub-groups derive from it)
  std::unique_ptr<Communicator> world;  // null for a single process
  // Beats to the `brigade launch` agent that started this process, from the moment it joins
  // until the group is destroyed; null when no agent asked for heartbeats (runtime/heartbeat.h).
  std::unique_ptr<HeartbeatSender> heartbeat;
  int rank() const { return env.rank; }
  int size() const { return env.world_size; }
};

// Environment variable through which `brigade launch` hands its workers a file store folder.
inline constexpr const char* kStoreDirEnv = "BRIGADE_STORE_DIR";

// Starts the heartbeat to the launcher first (when BRIGADE_HEARTBEAT_FD is set), so that a
// process stopped during the rendezvous is found too. Single process: no store, no
// communicator. Otherwise the store comm.store selects and a
// connected world communicator. Throws ConfigError for an unusable choice (naming the key),
// CommError when peers do not join within comm.timeout_s. communicator = false opens only the
// store (roles that talk point to point, such as a federation, need no world communicator, whose
// rendezvous would wait for every process).
ProcessGroup join_process_group(const CommConfig& comm, const DistEnv& env,
                                bool communicator = true);

// Whether a comm.host keeps the transport on this machine (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);
// What comm.transport, comm.key and comm.peer_public ask of this rank: null for plain TCP, else
// its identity (read from comm.key, or fresh) and the allow-list. ConfigError for a bad key file.
std::shared_ptr<const PeerSecurity> peer_security(const CommConfig& comm, const DistEnv& env);
// One line for the log: which transport the collectives use, and how peers prove themselves.
std::string transport_description(const CommOptions& options);

}  // namespace brigade
