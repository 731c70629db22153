#include "brigade/fed/dp_mechanism.h"

#include <sodium.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace brigade {

namespace {

void require_sodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
}

// A double in (0, 1] from the top 53 bits of a random word.
double unit(uint64_t word) {
  return (static_cast<double>(word >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

DpKey make_dp_key() {
  require_sodium();
  DpKey key;
  randombytes_buf(key.data(), key.size());
  return key;
}

DpMechanism::DpMechanism(double clip, double noise_multiplier, const DpKey& key)
    : clip_(clip), noise_(noise_multiplier) {
  require_sodium();
  static_assert(crypto_stream_chacha20_ietf_KEYBYTES == 32 && crypto_shorthash_KEYBYTES == 16);
  // Two subkeys, one per use, so the noise stream and the sample never share a key.
  crypto_kdf_derive_from_key(noise_key_.data(), noise_key_.size(), 1, "fednoise", key.data());
  crypto_kdf_derive_from_key(sample_key_.data(), sample_key_.size(), 2, "fedsampl", key.data());
}

DpMechanism::~DpMechanism() {
  sodium_memzero(noise_key_.data(), noise_key_.size());
  sodium_memzero(sample_key_.data(), sample_key_.size());
}

bool DpMechanism::sampled(int client, int64_t round, int64_t attempt, double q) const {
  if (q >= 1) return true;
  const int64_t input[3] = {round, attempt, client};
  uint8_t hash[crypto_shorthash_BYTES];
  crypto_shorthash(hash, reinterpret_cast<const uint8_t*>(input), sizeof input, sample_key_.data());
  uint64_t word = 0;
  std::memcpy(&word, hash, sizeof word);
  return unit(word) <= q;
}

int64_t DpMechanism::noised_mean(const std::vector<const float*>& updates, int64_t n,
                                 double expected_clients, int64_t round, int64_t attempt,
                                 float* out) {
  sum_.assign(static_cast<size_t>(n), 0.0);
  int64_t clipped = 0;
  for (const float* u : updates) {
    double squares = 0;
    for (int64_t i = 0; i < n; ++i) squares += static_cast<double>(u[i]) * u[i];
    const double norm = std::sqrt(squares);
    const double scale = norm > clip_ ? clip_ / norm : 1.0;
    clipped += norm > clip_ ? 1 : 0;
    for (int64_t i = 0; i < n; ++i) sum_[static_cast<size_t>(i)] += scale * u[i];
  }
  noise_and_divide(n, expected_clients, round, attempt, out);
  return clipped;
}

void DpMechanism::noised_sum(const float* sum, int64_t n, double expected_clients, int64_t round,
                             int64_t attempt, float* out) {
  sum_.assign(sum, sum + n);
  noise_and_divide(n, expected_clients, round, attempt, out);
}

void DpMechanism::noise_and_divide(int64_t n, double expected_clients, int64_t round,
                                   int64_t attempt, float* out) {
  add_noise(n, round, attempt);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(sum_[static_cast<size_t>(i)] / expected_clients);
  }
}

void DpMechanism::add_noise(int64_t n, int64_t round, int64_t attempt) {
  const double sigma = noise_ * clip_;
  if (sigma > 0) {
    const int64_t pairs = (n + 1) / 2;
    words_.resize(static_cast<size_t>(2 * pairs));
    uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES] = {};
    const int64_t at[1] = {round * 1024 + attempt};  // attempts are far fewer than 1024
    std::memcpy(nonce, at, sizeof at);
    crypto_stream_chacha20_ietf(reinterpret_cast<uint8_t*>(words_.data()),
                                words_.size() * sizeof(uint64_t), nonce, noise_key_.data());
    for (int64_t p = 0; p < pairs; ++p) {  // Box-Muller: two normals per pair of words
      const double r = std::sqrt(-2.0 * std::log(unit(words_[static_cast<size_t>(2 * p)])));
      const double theta = 2 * M_PI * unit(words_[static_cast<size_t>(2 * p + 1)]);
      sum_[static_cast<size_t>(2 * p)] += sigma * r * std::cos(theta);
      if (2 * p + 1 < n) sum_[static_cast<size_t>(2 * p + 1)] += sigma * r * std::sin(theta);
    }
  }
}

}  // namespace brigade
