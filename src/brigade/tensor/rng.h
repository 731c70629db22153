#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). Value i of stream
// (seed, key) is a pure function of (seed, key, i): there is no generator state to carry,
// split or save, so initialisation and data order do not depend on how many ranks share
// the work or where a run was resumed.
#include <array>
#include <cstdint>
#include <string_view>

namespace brigade {

// 64-bit FNV-1a of a name: turns "h.3.attn.c_attn.weight" into a stream key.
uint64_t hash_name(std::string_view name);

// Mixes several 64-bit words into one key (e.g. seed, epoch).
uint64_t mix_keys(uint64_t a, uint64_t b);

// One Philox4x32-10 block: four independent 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// Uniform in [0, 1) for element `index` of stream (seed, key).
float random_uniform(uint64_t seed, uint64_t key, uint64_t index);

// out[i] = mean + std * N(0,1) for element (first_index + i) of stream (seed, key).
void fill_normal(float* out, int64_t n, float mean, float std, uint64_t seed, uint64_t key,
                 uint64_t first_index = 0);

// out[i] = lo + (hi - lo) * U[0,1) for element (first_index + i) of stream (seed, key).
void fill_uniform(float* out, int64_t n, float lo, float hi, uint64_t seed, uint64_t key,
                  uint64_t first_index = 0);

// A bijection of [0, n) keyed by (seed, key): a Feistel network with cycle walking.
// Shuffles n examples without allocating a permutation table.
class RandomPermutation {
 public:
  RandomPermutation(uint64_t n, uint64_t seed, uint64_t key);
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t n_;
  uint64_t key_;
  int half_bits_;
};

}  // namespace brigade
