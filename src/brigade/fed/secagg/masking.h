#pragma once
// The masks of secure aggregation (Bonawitz et al. 2017, protocol.h): the PRG that stretches a
// 32-byte seed over an update, the pairwise seed s_uv that u and v agree on without talking,
// and the commitment that lets the server check a rebuilt self-mask seed.
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/fed/secagg/protocol.h"
#include "brigade/fed/secagg/secret.h"

namespace brigade::secagg {

// PRG(seed): ChaCha20 keyed by the seed (libsodium's randombytes_buf_deterministic), read as n
// little-endian uint32. out is (n).
void expand_mask(const Seed& seed, uint32_t* out, int64_t n);

enum class MaskSign { kAdd, kSubtract };

// acc = acc +/- PRG(seed) mod 2^32, for acc (n). scratch is resized to n and holds the last
// mask: the caller wipes it (wipe_mask_scratch) when done.
void apply_mask(const Seed& seed, MaskSign sign, uint32_t* acc, int64_t n,
                std::vector<uint32_t>* scratch);
void wipe_mask_scratch(std::vector<uint32_t>* scratch);

// The sign of s_uv in y_u: + when v comes after u, - before, so the pair cancels in the sum.
inline MaskSign pairwise_sign(uint32_t self, uint32_t peer) {
  return peer > self ? MaskSign::kAdd : MaskSign::kSubtract;
}

// s_uv = BLAKE2b(domain, round, lower client, higher client, their s public keys,
// X25519(s_sk_self, s_pk_peer)): the same for both ends. Returns false with *why when s_pk_peer is
// of small order (the shared point would be zero) or self == peer.
bool pairwise_seed(const SecretKey& s_sk_self, const PublicKey& s_pk_self, uint32_t self,
                   const PublicKey& s_pk_peer, uint32_t peer, const RoundId& id, Seed* out,
                   std::string* why);

// BLAKE2b(domain, round, owner, b_owner): binds the owner to its self-mask seed (hiding, as the
// seed is 32 random bytes).
Digest commit_seed(const Seed& seed, uint32_t owner, const RoundId& id);

// Whether pk can take part in an X25519 agreement (it is not of small order).
bool usable_public_key(const PublicKey& pk);

// The X25519 public key of sk.
PublicKey public_key_of(const SecretKey& sk);

}  // namespace brigade::secagg
