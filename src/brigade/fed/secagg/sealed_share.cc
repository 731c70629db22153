#include "brigade/fed/secagg/sealed_share.h"

#include <fmt/format.h>
#include <sodium.h>

#include <cstring>

#include "brigade/fed/secagg/sodium_init.h"

namespace brigade::secagg {
namespace {

inline constexpr uint32_t kShareMagic = 0x31535342;  // "BSS1"
inline constexpr size_t kPlainBytes = 4 + 8 + 8 + 8 + 4 + 4 + 32 + 32;
static_assert(kSealedShareBytes == crypto_box_NONCEBYTES + crypto_box_MACBYTES + kPlainBytes);

void put(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The binding part of the plaintext: everything but the two shares.
void put_binding(uint8_t* p, uint32_t sender, uint32_t recipient, const RoundId& id) {
  put(p, kShareMagic, 4);
  put(p + 4, id.run_tag, 8);
  put(p + 12, static_cast<uint64_t>(id.round), 8);
  put(p + 20, static_cast<uint64_t>(id.attempt), 8);
  put(p + 28, sender, 4);
  put(p + 32, recipient, 4);
}
inline constexpr size_t kBindingBytes = 36;

}  // namespace

bool seal_share(const SharePair& shares, uint32_t sender, uint32_t recipient, const RoundId& id,
                const SecretKey& c_sk_sender, const PublicKey& c_pk_recipient, SealedBytes* box,
                std::string* why) {
  if (!sodium_ready(why)) return false;
  Secret<kPlainBytes> plain;
  put_binding(plain.data(), sender, recipient, id);
  std::memcpy(plain.data() + kBindingBytes, shares.key_share.data(), 32);
  std::memcpy(plain.data() + kBindingBytes + 32, shares.seed_share.data(), 32);
  uint8_t* nonce = box->data();
  randombytes_buf(nonce, crypto_box_NONCEBYTES);
  if (crypto_box_easy(box->data() + crypto_box_NONCEBYTES, plain.data(), plain.size(), nonce,
                      c_pk_recipient.data(), c_sk_sender.data()) != 0) {
    return detail::refuse(why,
                          fmt::format("client {}'s encryption key is of small order", recipient));
  }
  return true;
}

bool open_share(const SealedBytes& box, uint32_t sender, uint32_t recipient, const RoundId& id,
                const SecretKey& c_sk_recipient, const PublicKey& c_pk_sender, SharePair* shares,
                std::string* why) {
  Secret<kPlainBytes> plain;
  const uint8_t* nonce = box.data();
  if (crypto_box_open_easy(plain.data(), box.data() + crypto_box_NONCEBYTES,
                           box.size() - crypto_box_NONCEBYTES, nonce, c_pk_sender.data(),
                           c_sk_recipient.data()) != 0) {
    return detail::refuse(why, fmt::format("the share from client {} does not open (tampered, or "
                                           "not sealed by it for this client)",
                                           sender));
  }
  uint8_t expected[kBindingBytes];
  put_binding(expected, sender, recipient, id);
  if (std::memcmp(plain.data(), expected, kBindingBytes) != 0) {
    const uint8_t* p = plain.data();
    return detail::refuse(
        why, fmt::format("the share from client {} is bound to run {:016x} round {} attempt {}, "
                         "client {} -> {} (expected run {:016x} round {} attempt {}, {} -> {})",
                         sender, get(p + 4, 8), static_cast<int64_t>(get(p + 12, 8)),
                         static_cast<int64_t>(get(p + 20, 8)), get(p + 28, 4), get(p + 32, 4),
                         id.run_tag, id.round, id.attempt, sender, recipient));
  }
  std::memcpy(shares->key_share.data(), plain.data() + kBindingBytes, 32);
  std::memcpy(shares->seed_share.data(), plain.data() + kBindingBytes + 32, 32);
  return true;
}

}  // namespace brigade::secagg
