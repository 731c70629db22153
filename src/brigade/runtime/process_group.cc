#include "brigade/runtime/process_group.h"

#include <fmt/format.h>

#include <cstdlib>

#include "brigade/base/error.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/tcp_store.h"

namespace brigade {

namespace {

std::shared_ptr<Store> open_store(const CommConfig& comm, const DistEnv& env,
                                  std::chrono::milliseconds timeout) {
  const char* dir = std::getenv(kStoreDirEnv);
  bool use_file = comm.store == "file" || (comm.store == "auto" && dir && *dir);
  if (use_file) {
    if (!dir || !*dir) {
      throw ConfigError(
          fmt::format("comm.store = \"file\": needs the folder in {} (brigade "
                      "launch sets it; or use comm.store = \"tcp\")",
                      kStoreDirEnv));
    }
    // No token: a file store is guarded by its folder's permissions (the launcher's is 0700,
    // and FileStore creates a missing one 0700), which only this user's processes pass, and
    // those could read the token from our environment anyway.
    return std::make_shared<FileStore>(dir, timeout);
  }
  // The token comes from BRIGADE_STORE_TOKEN (TcpStoreOptions' default), which brigade launch
  // sets; rank 0's server warns if there is none.
  TcpStoreOptions options;
  options.host = env.master_addr;
  options.port = env.master_port;
  options.is_server = env.rank == 0;
  options.timeout = timeout;
  options.rank = env.rank;
  return std::make_shared<TcpStore>(options);
}

}  // namespace

ProcessGroup join_process_group(const CommConfig& comm, const DistEnv& env, bool communicator) {
  ProcessGroup group;
  group.env = env;
  group.heartbeat = start_heartbeat_from_env();
  if (env.world_size == 1) return group;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(comm.timeout_s * 1000));
  CommOptions& o = group.world_options;
  o.backend = comm.backend;
  o.rank = env.rank;
  o.size = env.world_size;
  o.group_name = "world";
  o.store = open_store(comm, env, timeout);
  o.timeout = timeout;
  o.hostname = comm.host;
  o.validate();
  if (communicator) group.world = create_communicator(o);
  return group;
}

}  // namespace brigade
