#pragma once
// Sequential random draws for data partitioning, on the project's Philox generator
// (tensor/rng.h): draw i of stream (seed, key) is Philox block i, so a sequence of calls is a
// pure function of (seed, key).
//
// Why not <random>: std::mt19937_64's raw output is fixed by the standard, but the
// distributions are not (std::gamma_distribution, std::uniform_int_distribution and
// std::shuffle differ between libstdc++, libc++ and MSVC, and may change between versions).
// A partition must be the same on every machine that builds brigade, so every distribution
// here is written out on top of raw 32-bit words: integers by Lemire's multiply-and-reject,
// normals by Marsaglia's polar method, gammas by Marsaglia-Tsang. The only library maths are
// sqrt (exact under IEEE 754), log and exp: these are not required to be correctly rounded,
// so another libm (or another code path of one) may differ in the last ulp, which moves a
// cut only if floor(cumulative share x count) lands on exactly that rounding.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace brigade {

class RandomStream {
 public:
  RandomStream(uint64_t seed, uint64_t key) : seed_(seed), key_(key) {}

  uint32_t next_u32();
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double next_unit();
  // Uniform in [0, n), unbiased; n > 0.
  uint64_t next_below(uint64_t n);
  // Standard normal.
  double next_normal();

 private:
  uint64_t seed_, key_;
  uint64_t counter_ = 0;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;  // words of block_ already handed out
};

// Fisher-Yates shuffle of values in place.
void shuffle(std::span<int64_t> values, RandomStream& rng);

// log of a Gamma(shape, 1) draw; shape > 0. In logs because for shape << 1 the draw itself
// underflows double (a Dir(0.01) over 100 clients has components below 1e-300).
double sample_log_gamma(RandomStream& rng, double shape);

// A Gamma(shape, scale) draw (mean shape * scale, variance shape * scale^2); shape, scale > 0.
double sample_gamma(RandomStream& rng, double shape, double scale = 1.0);

// n proportions ~ Dirichlet(concentration, ..., concentration), summing to 1; n >= 1.
std::vector<double> sample_dirichlet(RandomStream& rng, double concentration, int64_t n);

}  // namespace brigade
