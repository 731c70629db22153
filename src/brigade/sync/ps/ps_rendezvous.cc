#include "brigade/sync/ps/ps_rendezvous.h"

#include <fmt/format.h>

#include <chrono>
#include <random>
#include <thread>

#include "brigade/base/error.h"

namespace brigade {

namespace {

std::string worker_key(int w) {
  return fmt::format("ps/worker/{}/key", w);
}
std::string server_key(int k) {
  return fmt::format("ps/server/{}/address", k);
}
constexpr const char* kRunTagKey = "ps/run_tag";
// Server k's word that it admits worker w's key (the key itself, so that one admitted for an
// earlier incarnation of the worker does not count).
std::string admitted_key(int k, int w) {
  return fmt::format("ps/server/{}/admitted/{}", k, w);
}

uint64_t read_tag(Store& store) {
  const std::string text = store.get_string(kRunTagKey);
  try {
    size_t used = 0;
    const uint64_t tag = std::stoull(text, &used, 16);
    if (used == text.size()) return tag;
  } catch (const std::exception&) {
  }
  throw CommError(
      CommError::Kind::kOther,
      fmt::format("the store's parameter-server run tag is malformed ({} bytes)", text.size()));
}

}  // namespace

std::pair<int64_t, int64_t> ps_server_range(int64_t total, int servers, int k) {
  return {total * k / servers, total * (k + 1) / servers};
}

std::vector<PsServerAddress> ps_worker_rendezvous(Store& store, int worker, int servers,
                                                  const CurveKeyPair& keys, uint64_t* run_tag) {
  if (worker == 0) {
    std::random_device entropy;
    const uint64_t tag = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
    store.set_string(kRunTagKey, fmt::format("{:016x}", tag));
  }
  store.set_string(worker_key(worker), keys.public_key);
  *run_tag = read_tag(store);
  std::vector<PsServerAddress> out;
  for (int k = 0; k < servers; ++k) {
    const std::string value = store.get_string(server_key(k));
    const size_t space = value.find(' ');
    if (space != 40 || value.size() < 42 || value.size() > 300) {
      throw CommError(CommError::Kind::kOther,
                      fmt::format("parameter server {}'s address in the store is malformed", k));
    }
    out.push_back({.endpoint = value.substr(41), .public_key = value.substr(0, 40)});
  }
  // Connect only once every server admits this key: a CURVE handshake its ZAP handler refused
  // is not tried again.
  const auto deadline = std::chrono::steady_clock::now() + store.timeout();
  for (int k = 0; k < servers; ++k) {
    while (store.get_string(admitted_key(k, worker)) != keys.public_key) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw CommError(CommError::Kind::kTimeout,
                        fmt::format("worker {}: parameter server {} did not admit this worker's "
                                    "key within {} s",
                                    worker, k, store.timeout().count() / 1000.0));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return out;
}

void ps_confirm_admission(Store& store, int k, int w, const std::string& public_key) {
  store.set_string(admitted_key(k, w), public_key);
}

std::map<std::string, int> ps_worker_keys(Store& store, int workers, uint64_t* run_tag) {
  std::map<std::string, int> allow;
  for (int w = 0; w < workers; ++w) {
    const std::string key = store.get_string(worker_key(w));
    if (key.size() != 40) {
      throw CommError(CommError::Kind::kOther,
                      fmt::format("worker {}'s public key in the store is malformed", w));
    }
    allow[key] = w;
  }
  *run_tag = read_tag(store);
  return allow;
}

std::string ps_worker_key_if_published(Store& store, int w) {
  if (!store.check({worker_key(w)})) return "";
  std::string key = store.get_string(worker_key(w));
  if (key.size() != 40) {
    throw CommError(CommError::Kind::kOther,
                    fmt::format("worker {}'s public key in the store is malformed", w));
  }
  return key;
}

void ps_publish_server(Store& store, int k, const PsServerAddress& address) {
  store.set_string(server_key(k), address.public_key + " " + address.endpoint);
}

}  // namespace brigade
