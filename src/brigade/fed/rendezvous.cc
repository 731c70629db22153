#include "brigade/fed/rendezvous.h"

#include <fmt/format.h>

#include <chrono>
#include <random>
#include <thread>

#include "brigade/base/error.h"

namespace brigade {

namespace {

constexpr const char* kCoordinatorKey = "fed/coordinator";

std::string client_key_name(int client) {
  return fmt::format("fed/client/{}/key", client);
}

std::string admitted_key_name(int client) {
  return fmt::format("fed/client/{}/admitted", client);
}

CommError malformed(const std::string& what) {
  return CommError(CommError::Kind::kOther, what + " in the rendezvous store is malformed");
}

}  // namespace

uint64_t draw_run_tag() {
  std::random_device entropy;
  return (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
}

void publish_coordinator(Store& store, const CoordinatorAddress& address) {
  store.set_string(kCoordinatorKey, fmt::format("{} {:016x} {}", address.public_key,
                                                address.run_tag, address.endpoint));
}

CoordinatorAddress join_coordinator(Store& store, int client, const std::string& public_key) {
  store.set_string(client_key_name(client), public_key);
  const std::string value = store.get_string(kCoordinatorKey);
  // "<40 key> <16 hex tag> <endpoint>"
  if (value.size() < 60 || value.size() > 400 || value[40] != ' ' || value[57] != ' ') {
    throw malformed("the coordinator's address");
  }
  CoordinatorAddress out{.endpoint = value.substr(58), .public_key = value.substr(0, 40)};
  try {
    size_t used = 0;
    out.run_tag = std::stoull(value.substr(41, 16), &used, 16);
    if (used != 16) throw malformed("the run tag");
  } catch (const std::logic_error&) {
    throw malformed("the run tag");
  }
  // The admission names the key it admitted: one left by this client's earlier incarnation (a
  // restart with a new key) does not count.
  const auto deadline = std::chrono::steady_clock::now() + store.timeout();
  while (store.get_string(admitted_key_name(client)) != public_key) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw CommError(CommError::Kind::kTimeout,
                      fmt::format("client {}: the coordinator did not admit this client's key "
                                  "within {} s",
                                  client, store.timeout().count() / 1000.0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return out;
}

void confirm_admission(Store& store, int client, const std::string& public_key) {
  store.set_string(admitted_key_name(client), public_key);
}

std::string client_key_if_published(Store& store, int client) {
  const std::string name = client_key_name(client);
  if (!store.check({name})) return "";
  std::string key = store.get_string(name);
  if (key.size() != 40) throw malformed(fmt::format("client {}'s public key", client));
  return key;
}

}  // namespace brigade
