#include "brigade/comm/comm_factory.h"

#include <map>
#include <mutex>

#include "brigade/base/error.h"
#include "brigade/comm/gloo/gloo_communicator.h"

namespace brigade {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, CommFactory> factories;
};

// Built-in backends are registered here, on first use, rather than by static initializers in
// their own files: the library is static, and the linker would drop an object file that
// nothing references.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->factories["gloo"] = [](const CommOptions& o) -> std::unique_ptr<Communicator> {
      return std::make_unique<detail::GlooCommunicator>(o);
    };
    return reg;
  }();
  return *r;
}

std::string join_ranks(std::span<const int> ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace

void CommOptions::validate() const {
  if (size < 1) throw ConfigError("comm: size must be >= 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size) {
    throw ConfigError("comm: rank must be in [0, " + std::to_string(size) + "), got " +
                      std::to_string(rank));
  }
  if (group_name.empty()) throw ConfigError("comm: group_name must not be empty");
  if (size > 1 && !store) {
    throw ConfigError("comm: group '" + group_name + "' of size " + std::to_string(size) +
                      " needs a rendezvous store (FileStore or TcpStore)");
  }
  if (timeout.count() <= 0) {
    throw ConfigError("comm: timeout must be positive, got " + std::to_string(timeout.count()) +
                      " ms");
  }
  if (hostname.empty() && iface.empty()) {
    throw ConfigError("comm: set hostname (e.g. 127.0.0.1) or iface to bind the transport");
  }
}

void register_comm_backend(const std::string& name, CommFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

std::vector<std::string> registered_comm_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Communicator> create_communicator(const CommOptions& options) {
  options.validate();
  CommFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(options.backend);
    if (it == r.factories.end()) {
      std::string known;
      for (const auto& [name, f] : r.factories) known += (known.empty() ? "" : ", ") + name;
      throw ConfigError("comm: unknown backend '" + options.backend + "' (registered: " + known +
                        ")");
    }
    factory = it->second;
  }
  return factory(options);
}

std::unique_ptr<Communicator> create_subgroup(const CommOptions& world,
                                              std::span<const int> world_ranks,
                                              const std::string& group_name) {
  world.validate();
  std::string list = join_ranks(world_ranks);
  list.insert(list.begin(), '[');
  list.push_back(']');
  if (world_ranks.empty()) {
    throw ConfigError("comm: group '" + group_name + "' has no members");
  }
  int my_index = -1;
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    int r = world_ranks[i];
    if (r < 0 || r >= world.size) {
      throw ConfigError("comm: group '" + group_name + "' " + list + " names rank " +
                        std::to_string(r) + ", outside the world of size " +
                        std::to_string(world.size));
    }
    for (size_t j = 0; j < i; ++j) {
      if (world_ranks[j] == r) {
        throw ConfigError("comm: group '" + group_name + "' " + list + " lists rank " +
                          std::to_string(r) + " twice");
      }
    }
    if (r == world.rank) my_index = static_cast<int>(i);
  }
  if (my_index < 0) {
    throw ConfigError("comm: rank " + std::to_string(world.rank) + " is not a member of group '" +
                      group_name + "' " + list);
  }
  CommOptions sub = world;
  sub.rank = my_index;
  sub.size = static_cast<int>(world_ranks.size());
  sub.group_name = group_name;
  sub.store_prefix = world.effective_prefix() + "/" + group_name + list;
  return create_communicator(sub);
}

}  // namespace brigade
