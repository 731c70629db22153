#include "brigade/fed/secagg/shamir.h"

#include <fmt/format.h>
#include <sodium.h>

#include <array>
#include <mutex>
#include <vector>

extern "C" {
#include <libgfshare.h>
}

#include "brigade/fed/secagg/protocol.h"
#include "brigade/fed/secagg/sodium_init.h"

namespace brigade::secagg {
namespace {

void fill_from_sodium(unsigned char* buffer, unsigned int count) {
  randombytes_buf(buffer, count);
}

// libgfshare draws its polynomial coefficients (and scrubs freed contexts) through this global.
bool prepare_gfshare(std::string* why) {
  static std::once_flag once;
  std::call_once(once, [] { gfshare_fill_rand = fill_from_sodium; });
  return sodium_ready(why);
}

bool check_numbers(std::span<const uint8_t> numbers, int threshold, size_t size, size_t share_bytes,
                   std::string* why) {
  if (threshold < 2 || threshold > kMaxShares) {
    return detail::refuse(why, fmt::format("Shamir threshold {} (2 to {})", threshold, kMaxShares));
  }
  if (numbers.size() < static_cast<size_t>(threshold) || numbers.size() > kMaxShares) {
    return detail::refuse(why, fmt::format("{} shares for threshold {} (at least the threshold, at "
                                           "most {})",
                                           numbers.size(), threshold, kMaxShares));
  }
  if (size == 0) return detail::refuse(why, "an empty Shamir secret");
  if (share_bytes != numbers.size() * size) {
    return detail::refuse(why, fmt::format("{} bytes of shares for {} shares of {} bytes",
                                           share_bytes, numbers.size(), size));
  }
  std::array<bool, 256> seen{};
  for (const uint8_t x : numbers) {
    if (x == 0) return detail::refuse(why, "share number 0 (it would be the secret itself)");
    if (seen[x]) return detail::refuse(why, fmt::format("share number {} given twice", x));
    seen[x] = true;
  }
  return true;
}

}  // namespace

bool shamir_split(std::span<const uint8_t> secret, int threshold, std::span<const uint8_t> numbers,
                  std::span<uint8_t> shares, std::string* why) {
  if (!check_numbers(numbers, threshold, secret.size(), shares.size(), why)) return false;
  if (!prepare_gfshare(why)) return false;
  std::vector<uint8_t> xs(numbers.begin(), numbers.end());  // libgfshare takes them non-const
  gfshare_ctx* ctx = gfshare_ctx_init_enc(xs.data(), static_cast<unsigned>(xs.size()),
                                          static_cast<unsigned char>(threshold),
                                          static_cast<unsigned>(secret.size()));
  if (ctx == nullptr) return detail::refuse(why, "libgfshare could not make a context");
  // setsecret copies the secret in and only reads it; the context is scrubbed when freed.
  gfshare_ctx_enc_setsecret(ctx, const_cast<uint8_t*>(secret.data()));
  for (size_t i = 0; i < xs.size(); ++i) {
    gfshare_ctx_enc_getshare(ctx, static_cast<unsigned char>(i), shares.data() + i * secret.size());
  }
  gfshare_ctx_free(ctx);
  return true;
}

bool shamir_combine(std::span<const uint8_t> numbers, std::span<const uint8_t> shares,
                    int threshold, std::span<uint8_t> secret, std::string* why) {
  if (!check_numbers(numbers, threshold, secret.size(), shares.size(), why)) return false;
  if (!prepare_gfshare(why)) return false;
  std::vector<uint8_t> xs(numbers.begin(), numbers.end());
  gfshare_ctx* ctx = gfshare_ctx_init_dec(xs.data(), static_cast<unsigned>(xs.size()),
                                          static_cast<unsigned>(secret.size()));
  if (ctx == nullptr) return detail::refuse(why, "libgfshare could not make a context");
  for (size_t i = 0; i < xs.size(); ++i) {
    // giveshare copies the share in and only reads it.
    gfshare_ctx_dec_giveshare(ctx, static_cast<unsigned char>(i),
                              const_cast<uint8_t*>(shares.data() + i * secret.size()));
  }
  gfshare_ctx_dec_extract(ctx, secret.data());
  gfshare_ctx_free(ctx);
  return true;
}

}  // namespace brigade::secagg
