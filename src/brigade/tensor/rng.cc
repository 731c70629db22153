#include "brigade/tensor/rng.h"

#include <cmath>

#include "brigade/base/check.h"

namespace brigade {

uint64_t hash_name(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t mix_keys(uint64_t a, uint64_t b) {
  // splitmix64 finaliser over a combination; good avalanche, cheap.
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

namespace {
// 24 random bits -> [0, 1), exactly representable in float.
inline float to_unit(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}
}  // namespace

float random_uniform(uint64_t seed, uint64_t key, uint64_t index) {
  return to_unit(philox4x32(seed, key, index)[0]);
}

void fill_normal(float* out, int64_t n, float mean, float std, uint64_t seed, uint64_t key,
                 uint64_t first_index) {
  for (int64_t i = 0; i < n; ++i) {
    auto r = philox4x32(seed, key, first_index + static_cast<uint64_t>(i));
    // Box-Muller on two words of this element's own block; u1 in (0, 1].
    double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967296.0;
    double u2 = static_cast<double>(r[1]) / 4294967296.0;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    out[i] = mean + std * static_cast<float>(z);
  }
}

void fill_uniform(float* out, int64_t n, float lo, float hi, uint64_t seed, uint64_t key,
                  uint64_t first_index) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = lo + (hi - lo) * random_uniform(seed, key, first_index + static_cast<uint64_t>(i));
}

RandomPermutation::RandomPermutation(uint64_t n, uint64_t seed, uint64_t key)
    : n_(n), key_(mix_keys(seed, key)) {
  BRIGADE_CHECK(n > 0) << "permutation of an empty range";
  int bits = 2;
  while ((uint64_t{1} << bits) < n) ++bits;
  if (bits % 2) ++bits;
  half_bits_ = bits / 2;
}

uint64_t RandomPermutation::operator()(uint64_t i) const {
  BRIGADE_CHECK(i < n_) << i << " >= " << n_;
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = i;
  // Cycle walking: the Feistel network permutes [0, 2^bits); re-apply until inside [0, n).
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = philox4x32(key_, round, right)[0] & mask;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

}  // namespace brigade
