#include "brigade/runtime/process_group.h"

#include <fmt/format.h>

#include <cstdlib>

#include "brigade/base/error.h"
#include "brigade/base/path_pattern.h"
#include "brigade/comm/file_store.h"
#include "brigade/comm/key_file.h"
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

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::shared_ptr<const PeerSecurity> peer_security(const CommConfig& comm, const DistEnv& env) {
  const bool tls =
      comm.transport == "tls" || (comm.transport == "auto" && !is_loopback_host(comm.host));
  if (!tls) return nullptr;
  auto security = std::make_shared<PeerSecurity>();
  security->identity =
      comm.key.empty()
          ? PeerIdentity::generate()
          : read_tls_secret_key_file(fill_placeholder(comm.key, "{rank}", env.rank), "comm.key");
  if (!comm.peer_public.empty()) {
    for (int r = 0; r < env.world_size; ++r) {
      security->allowed.push_back(read_tls_public_key_file(
          fill_placeholder(comm.peer_public, "{rank}", r), "comm.peer_public"));
    }
  }
  security->allowed_from = "comm.peer_public";
  security->identity_from = comm.key.empty() ? "" : "comm.key";
  return security;
}

std::string transport_description(const CommOptions& options) {
  const PeerSecurity* s = options.security.get();
  if (!s) return "plain TCP (comm.transport = \"tcp\", or \"auto\" on a loopback comm.host)";
  return fmt::format("TLS 1.3, every rank proving its Ed25519 key ({}; {})",
                     s->identity_from.empty() ? "fresh for this job" : "from " + s->identity_from,
                     s->allowed.empty() ? "any key published in the job's store"
                                        : fmt::format("{} keys allowed by {}", s->allowed.size(),
                                                      s->allowed_from));
}

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
  o.security = peer_security(comm, env);
  o.validate();
  if (communicator) group.world = create_communicator(o);
  return group;
}

}  // namespace brigade
