#include "brigade/fed/secagg/masking.h"

#include <sodium.h>

#include <array>
#include <bit>
#include <cstring>

namespace brigade::secagg {
namespace {

void hash_u32(crypto_generichash_state* state, uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  crypto_generichash_update(state, b, sizeof b);
}

void hash_u64(crypto_generichash_state* state, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  crypto_generichash_update(state, b, sizeof b);
}

void hash_round(crypto_generichash_state* state, const char* domain, const RoundId& id) {
  crypto_generichash_init(state, nullptr, 0, 32);
  crypto_generichash_update(state, reinterpret_cast<const uint8_t*>(domain), std::strlen(domain));
  hash_u64(state, id.run_tag);
  hash_u64(state, static_cast<uint64_t>(id.round));
  hash_u64(state, static_cast<uint64_t>(id.attempt));
}

}  // namespace

void expand_mask(const Seed& seed, uint32_t* out, int64_t n) {
  static_assert(randombytes_SEEDBYTES == Seed::size());
  randombytes_buf_deterministic(out, static_cast<size_t>(n) * sizeof(uint32_t), seed.data());
  if constexpr (std::endian::native == std::endian::big) {
    for (int64_t i = 0; i < n; ++i) out[i] = __builtin_bswap32(out[i]);
  }
}

void apply_mask(const Seed& seed, MaskSign sign, uint32_t* acc, int64_t n,
                std::vector<uint32_t>* scratch) {
  scratch->resize(static_cast<size_t>(n));
  uint32_t* mask = scratch->data();
  expand_mask(seed, mask, n);
  if (sign == MaskSign::kAdd) {
    for (int64_t i = 0; i < n; ++i) acc[i] += mask[i];
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] -= mask[i];
  }
}

void wipe_mask_scratch(std::vector<uint32_t>* scratch) {
  wipe_bytes(scratch->data(), scratch->size() * sizeof(uint32_t));
}

bool pairwise_seed(const SecretKey& s_sk_self, const PublicKey& s_pk_self, uint32_t self,
                   const PublicKey& s_pk_peer, uint32_t peer, const RoundId& id, Seed* out,
                   std::string* why) {
  if (self == peer) return detail::refuse(why, "a pairwise seed of a client with itself");
  Secret<crypto_scalarmult_BYTES> shared;
  if (crypto_scalarmult(shared.data(), s_sk_self.data(), s_pk_peer.data()) != 0) {
    return detail::refuse(why, "a mask-agreement key of small order");
  }
  const bool self_first = self < peer;
  crypto_generichash_state state;
  hash_round(&state, "brigade secagg pairwise seed v1", id);
  hash_u32(&state, self_first ? self : peer);
  hash_u32(&state, self_first ? peer : self);
  crypto_generichash_update(&state, (self_first ? s_pk_self : s_pk_peer).data(), kKeyBytes);
  crypto_generichash_update(&state, (self_first ? s_pk_peer : s_pk_self).data(), kKeyBytes);
  crypto_generichash_update(&state, shared.data(), shared.size());
  crypto_generichash_final(&state, out->data(), out->size());
  wipe_bytes(&state, sizeof state);
  return true;
}

Digest commit_seed(const Seed& seed, uint32_t owner, const RoundId& id) {
  crypto_generichash_state state;
  hash_round(&state, "brigade secagg self-mask commitment v1", id);
  hash_u32(&state, owner);
  crypto_generichash_update(&state, seed.data(), seed.size());
  Digest digest;
  crypto_generichash_final(&state, digest.data(), digest.size());
  wipe_bytes(&state, sizeof state);
  return digest;
}

bool usable_public_key(const PublicKey& pk) {
  // X25519 clamps every scalar to a multiple of the cofactor 8, so any scalar gives the zero
  // point exactly for the keys of small order; this one is public.
  std::array<uint8_t, crypto_scalarmult_SCALARBYTES> probe;
  probe.fill(0x5a);
  std::array<uint8_t, crypto_scalarmult_BYTES> shared;
  return crypto_scalarmult(shared.data(), probe.data(), pk.data()) == 0;
}

PublicKey public_key_of(const SecretKey& sk) {
  PublicKey pk;
  crypto_scalarmult_base(pk.data(), sk.data());
  return pk;
}

}  // namespace brigade::secagg
