#include "brigade/comm/peer_identity.h"

#include <sodium.h>

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

namespace {

PeerIdentity identity_of_seed(const unsigned char* seed) {
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, seed);
  sodium_memzero(sk, sizeof(sk));
  return {.public_key = std::string(reinterpret_cast<const char*>(pk), sizeof(pk)),
          .seed = std::string(reinterpret_cast<const char*>(seed), crypto_sign_SEEDBYTES)};
}

}  // namespace

PeerIdentity PeerIdentity::generate() {
  BRIGADE_CHECK(sodium_init() >= 0) << "libsodium failed to initialise";
  unsigned char seed[crypto_sign_SEEDBYTES];
  randombytes_buf(seed, sizeof(seed));
  PeerIdentity id = identity_of_seed(seed);
  sodium_memzero(seed, sizeof(seed));
  return id;
}

std::optional<PeerIdentity> PeerIdentity::from_seed(const std::string& seed) {
  static_assert(crypto_sign_SEEDBYTES == kPeerKeyBytes &&
                crypto_sign_PUBLICKEYBYTES == kPeerKeyBytes);
  if (seed.size() != kPeerKeyBytes) return std::nullopt;
  BRIGADE_CHECK(sodium_init() >= 0) << "libsodium failed to initialise";
  return identity_of_seed(reinterpret_cast<const unsigned char*>(seed.data()));
}

bool PeerSecurity::allows(const std::string& public_key) const {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), public_key) != allowed.end();
}

std::string key_to_hex(const std::string& raw) {
  std::string hex(raw.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()),
                 raw.size());
  hex.pop_back();
  return hex;
}

std::optional<std::string> key_from_hex(const std::string& hex, size_t bytes) {
  if (hex.size() != 2 * bytes) return std::nullopt;
  // Without hex_end, sodium_hex2bin refuses any character that is not a hex digit.
  std::string raw(bytes, '\0');
  size_t got = 0;
  if (sodium_hex2bin(reinterpret_cast<unsigned char*>(raw.data()), bytes, hex.data(), hex.size(),
                     nullptr, &got, nullptr) != 0 ||
      got != bytes) {
    return std::nullopt;
  }
  return raw;
}

}  // namespace brigade
