#pragma once
// Long-term identities on disk (`brigade keygen`, docs/security.md). A key pair is two files
// next to each other, of one of two kinds:
//
//   curve (ZeroMQ CURVE: the federation's coordinator and clients)
//     NAME.key  mode 0600   "brigade-curve-secret-key-v1\npublic <Z85>\nsecret <Z85>\n"
//     NAME.pub  mode 0644   "brigade-curve-public-key-v1\n<Z85>\n"
//   tls (Ed25519: peers whose collectives run over TLS, comm.transport = "tls")
//     NAME.key  mode 0600   "brigade-tls-secret-key-v1\npublic <hex>\nsecret <hex seed>\n"
//     NAME.pub  mode 0644   "brigade-tls-public-key-v1\n<hex>\n"
//
// A peer that holds NAME.key proves it in every handshake; the other side pins or lists
// NAME.pub. Reading refuses a secret key file that group or others may read (as ssh does), a
// file over 4 KiB, a malformed key, a file of the other kind, and a secret key whose public half
// is not the one written beside it. Keys never reach a log: errors name the file, never its
// contents.
#include <string>

#include "brigade/comm/curve_socket.h"
#include "brigade/comm/peer_identity.h"

namespace brigade {

enum class KeyKind { kCurve, kTls };
const char* key_kind_name(KeyKind kind);  // "curve" | "tls"

// Writes a fresh pair as stem.key and stem.pub; refuses (ConfigError) when either exists.
// Returns the public key as the .pub file writes it (Z85 or hex).
std::string write_new_key_pair(const std::string& stem, KeyKind kind = KeyKind::kCurve);

// Reads a curve stem.key (the path as given); ConfigError naming `key` (the config key) on any
// fault.
CurveKeyPair read_secret_key_file(const std::string& path, const std::string& key);
// Reads a curve .pub file; ConfigError naming `key` on any fault.
std::string read_public_key_file(const std::string& path, const std::string& key);

// The same for tls files: the identity, and a raw (32-byte) public key.
PeerIdentity read_tls_secret_key_file(const std::string& path, const std::string& key);
std::string read_tls_public_key_file(const std::string& path, const std::string& key);

}  // namespace brigade
