#pragma once
// Long-term CURVE identities on disk (`brigade keygen`, docs/security.md): a key pair is two
// files next to each other,
//
//   NAME.key  mode 0600   "brigade-curve-secret-key-v1\npublic <Z85>\nsecret <Z85>\n"
//   NAME.pub  mode 0644   "brigade-curve-public-key-v1\n<Z85>\n"
//
// A peer that holds NAME.key proves it in every CURVE handshake; the other side pins or lists
// NAME.pub. Reading refuses a secret key file that group or others may read (as ssh does), a
// file over 4 KiB, a malformed key, and a secret key whose public half is not the one written
// beside it. Keys never reach a log: errors name the file, never its contents.
#include <string>

#include "brigade/comm/curve_socket.h"

namespace brigade {

// Writes a fresh pair as stem.key and stem.pub; refuses (ConfigError) when either exists.
// Returns the public key.
std::string write_new_key_pair(const std::string& stem);

// Reads stem.key (the path as given); ConfigError naming `key` (the config key) on any fault.
CurveKeyPair read_secret_key_file(const std::string& path, const std::string& key);
// Reads a .pub file; ConfigError naming `key` on any fault.
std::string read_public_key_file(const std::string& path, const std::string& key);

}  // namespace brigade
