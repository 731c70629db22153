#pragma once
// How parameter servers and workers find and trust each other, through the job's rendezvous
// store (comm/store.h, which admits only holders of the job's token): every process publishes
// the public half of a CURVE key pair it has just created (comm/curve_socket.h); servers wait for
// every worker's key (their allow-list), bind, and publish their endpoint; workers wait for
// the servers'. Worker 0 draws the run tag every message carries. Every wait is bounded by the
// store's timeout.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "brigade/comm/curve_socket.h"
#include "brigade/comm/store.h"

namespace brigade {

struct PsServerAddress {
  std::string endpoint;    // "tcp://127.0.0.1:41234"
  std::string public_key;  // Z85
};

// The flat range [begin, end) server k of `servers` owns: contiguous and balanced.
std::pair<int64_t, int64_t> ps_server_range(int64_t total, int servers, int k);

// Worker side: publishes this worker's public key (worker 0 also the run tag), then waits for
// every server's address and for every server to admit the key (ps_confirm_admission).
// Returns the addresses and sets *run_tag.
std::vector<PsServerAddress> ps_worker_rendezvous(Store& store, int worker, int servers,
                                                  const CurveKeyPair& keys, uint64_t* run_tag);

// Server side: waits for the workers' keys (key -> worker index) and the run tag.
std::map<std::string, int> ps_worker_keys(Store& store, int workers, uint64_t* run_tag);
// Worker w's key as the store holds it now (a restarted worker publishes a new one), or "" when
// none is published. CommError for a malformed one.
std::string ps_worker_key_if_published(Store& store, int w);
// Server k admits worker w's key (its ZAP handler accepts it from now on).
void ps_confirm_admission(Store& store, int k, int w, const std::string& public_key);
// Publishes server k's address once it listens.
void ps_publish_server(Store& store, int k, const PsServerAddress& address);

}  // namespace brigade
