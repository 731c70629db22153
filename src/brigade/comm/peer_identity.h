#pragma once
// Who a rank is on the wire when its collectives run over TLS (comm/gloo/tls_transport.h): an
// Ed25519 key pair, either made fresh for one job (its public half published in the job's
// rendezvous store, which only holders of the job's token reach) or read from a long-term key
// file of `brigade keygen --kind tls` (comm/key_file.h). The secret seed never reaches a log.
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace brigade {

inline constexpr size_t kPeerKeyBytes = 32;

struct PeerIdentity {
  std::string public_key;  // Ed25519, kPeerKeyBytes raw bytes
  std::string seed;        // the secret: Ed25519 seed, kPeerKeyBytes raw bytes

  // A fresh identity from libsodium's random source.
  static PeerIdentity generate();
  // The identity of a seed; nullopt unless the seed has kPeerKeyBytes bytes.
  static std::optional<PeerIdentity> from_seed(const std::string& seed);
};

// How a communicator's peers prove themselves (CommOptions::security): this rank's identity,
// and which public keys may take part.
struct PeerSecurity {
  PeerIdentity identity;
  // Raw public keys allowed to join; empty = any key a rank publishes in the job's store.
  std::vector<std::string> allowed;
  // The config key the list came from, for messages ("comm.peer_public").
  std::string allowed_from;
  // Where the identity came from, for the log: "comm.key" or "" (fresh for this job).
  std::string identity_from;

  bool allows(const std::string& public_key) const;
};

// Lower-case hex of raw bytes, and back (nullopt for anything but 2 * bytes hex digits).
std::string key_to_hex(const std::string& raw);
std::optional<std::string> key_from_hex(const std::string& hex, size_t bytes);

}  // namespace brigade
