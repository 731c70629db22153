#pragma once
// How the coordinator and its clients find and trust each other inside one job, through the
// job's rendezvous store (comm/store.h, which admits only holders of the job's token): every
// client publishes the public half of a CURVE key pair it has just created
// (comm/curve_socket.h); the coordinator binds, publishes its endpoint, its public key and the
// run tag, and admits a client's key whenever it appears (so clients may join late or come back
// with a new key), saying so in the store; a client connects only once its key is admitted, so
// its CURVE handshake is never refused. Every wait is bounded by the store's timeout.
#include <cstdint>
#include <string>

#include "brigade/comm/curve_socket.h"
#include "brigade/comm/store.h"

namespace brigade {

struct CoordinatorAddress {
  std::string endpoint;    // "tcp://127.0.0.1:41234"
  std::string public_key;  // Z85
  uint64_t run_tag = 0;
};

void publish_coordinator(Store& store, const CoordinatorAddress& address);
// Client side: publishes this client's key, then waits for the coordinator's address and for
// the coordinator to admit the key.
CoordinatorAddress join_coordinator(Store& store, int client, const std::string& public_key);
// Coordinator side: client k's key if it has published one (without waiting), else "".
std::string client_key_if_published(Store& store, int client);
// Coordinator side: client k's key `public_key` is on the allow-list.
void confirm_admission(Store& store, int client, const std::string& public_key);

// A fresh 64-bit run tag from the kernel's randomness.
uint64_t draw_run_tag();

}  // namespace brigade
