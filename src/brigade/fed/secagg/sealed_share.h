#pragma once
// The box one client seals its shares in for another (Bonawitz et al. 2017, step 2): the server
// carries it but cannot read it. crypto_box_easy (X25519 + XSalsa20-Poly1305) with the sender's
// c secret key and the recipient's c public key, a random nonce in front:
//
//   box = nonce (24) | MAC (16) | encrypted plaintext (100)
//   plaintext = magic "BSS1" u32 | run_tag u64 | round i64 | attempt i64 | sender u32 |
//               recipient u32 | share of s_sk_sender (32) | share of b_sender (32), little-endian
//
// The MAC proves the box was made by one of the two key holders; the plaintext names which way
// it goes and which round it belongs to, so the server can neither replay it into another round
// or run, nor hand a client back its own box to v as if it came from v (the box key is the same
// both ways).
#include <cstdint>
#include <string>

#include "brigade/fed/secagg/protocol.h"
#include "brigade/fed/secagg/secret.h"

namespace brigade::secagg {

// What one client holds of another's secrets.
struct SharePair {
  Secret<32> key_share;   // of s_sk_owner
  Secret<32> seed_share;  // of b_owner
};

// Seals `shares` from sender to recipient. False with *why when the recipient's key is of small
// order.
bool seal_share(const SharePair& shares, uint32_t sender, uint32_t recipient, const RoundId& id,
                const SecretKey& c_sk_sender, const PublicKey& c_pk_recipient, SealedBytes* box,
                std::string* why);

// Opens a box that claims to come from sender for recipient in round id. False with *why, and
// *shares untouched, when it does not open (tampered, or sealed for another pair of keys) or it
// names another sender, recipient, round or run.
bool open_share(const SealedBytes& box, uint32_t sender, uint32_t recipient, const RoundId& id,
                const SecretKey& c_sk_recipient, const PublicKey& c_pk_sender, SharePair* shares,
                std::string* why);

}  // namespace brigade::secagg
