#pragma once
// Creating communicators: options, the backend registry, and sub-groups.
//
// Backends register a factory under a name ("gloo" is built in; NCCL will add "nccl"), and
// callers pick one with CommOptions::backend. No caller needs an #ifdef per backend.
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/comm/peer_identity.h"
#include "brigade/comm/store.h"

namespace brigade {

struct CommOptions {
  std::string backend = "gloo";      // registry name (registered_comm_backends())
  int rank = 0;                      // this process in the group, 0..size-1
  int size = 1;                      // number of processes in the group
  std::string group_name = "world";  // for logs and errors ("world", "dp", "tp", ...)
  // Namespace of this group's rendezvous keys in the store; empty = group_name. Must be unique
  // per group within one store, and each group may be created once per store (start a new
  // store, e.g. a new directory or port, for a restarted job).
  std::string store_prefix;
  std::shared_ptr<Store> store;  // rendezvous; required when size > 1
  std::chrono::milliseconds timeout = std::chrono::seconds(30);  // rendezvous and every op wait
  std::string hostname = "127.0.0.1";  // address this rank's transport binds and advertises
  std::string iface;                   // network interface to bind instead (e.g. "eth0")
  // TLS between every pair of ranks, each proving its key (comm/gloo/tls_transport.h); null =
  // plain TCP. Every member of a group must choose the same; sub-groups inherit it.
  std::shared_ptr<const PeerSecurity> security;

  // Throws ConfigError naming the field, its value and what is allowed.
  void validate() const;
  const std::string& effective_prefix() const {
    return store_prefix.empty() ? group_name : store_prefix;
  }
};

using CommFactory = std::function<std::unique_ptr<Communicator>(const CommOptions&)>;

// Adds (or replaces) a backend.
void register_comm_backend(const std::string& name, CommFactory factory);
std::vector<std::string> registered_comm_backends();

// Creates and connects this rank's communicator; collective over the group's members (each
// calls it with its own rank). Throws ConfigError for invalid options or an unknown backend,
// CommError if a member does not join within the timeout (naming the missing ranks).
std::unique_ptr<Communicator> create_communicator(const CommOptions& options);

// Communicator for a subset of the world: `world` describes this rank in the world group,
// world_ranks lists the members in their new rank order (this rank must be one of them).
// Rendezvous keys live under "<world prefix>/<group_name>[r0,r1,...]" in the world's store, so
// every distinct group gets its own namespace. Only the members call it. Throws ConfigError if
// the list is invalid or does not contain world.rank.
std::unique_ptr<Communicator> create_subgroup(const CommOptions& world,
                                              std::span<const int> world_ranks,
                                              const std::string& group_name);

}  // namespace brigade
