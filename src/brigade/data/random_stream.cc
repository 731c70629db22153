#include "brigade/data/random_stream.h"

#include <algorithm>
#include <cmath>

#include "brigade/base/check.h"
#include "brigade/tensor/rng.h"

namespace brigade {

namespace {

constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

// Uniform in (0, 1): the midpoints of the 2^53 cells, so log() never sees 0.
double open_unit(RandomStream& rng) {
  return (static_cast<double>(rng.next_u64() >> 11) + 0.5) * kTwoToMinus53;
}

}  // namespace

uint32_t RandomStream::next_u32() {
  if (used_ == 4) {
    block_ = philox4x32(seed_, key_, counter_++);
    used_ = 0;
  }
  return block_[used_++];
}

uint64_t RandomStream::next_u64() {
  const uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

double RandomStream::next_unit() {
  return static_cast<double>(next_u64() >> 11) * kTwoToMinus53;
}

uint64_t RandomStream::next_below(uint64_t n) {
  BRIGADE_CHECK(n > 0) << "next_below(0)";
  // Lemire, "Fast random integer generation in an interval" (2019): the high word of x * n,
  // rejecting the few low words that would make some results more likely than others.
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
  if (static_cast<uint64_t>(m) < n) {
    const uint64_t threshold = (0 - n) % n;
    while (static_cast<uint64_t>(m) < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * n;
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double RandomStream::next_normal() {
  // Marsaglia's polar method: a point uniform in the unit disc, scaled (one of its two
  // independent normals is used; the other is dropped to keep the stream stateless).
  for (;;) {
    const double u = 2.0 * next_unit() - 1.0;
    const double v = 2.0 * next_unit() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

void shuffle(std::span<int64_t> values, RandomStream& rng) {
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.next_below(i));
    std::swap(values[i - 1], values[j]);
  }
}

double sample_log_gamma(RandomStream& rng, double shape) {
  BRIGADE_CHECK(shape > 0.0 && std::isfinite(shape)) << "gamma shape " << shape;
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a) (Marsaglia and Tsang, section 6).
    return sample_log_gamma(rng, shape + 1.0) + std::log(open_unit(rng)) / shape;
  }
  // Marsaglia and Tsang, "A simple method for generating gamma variables" (2000): d * v with
  // v = (1 + c x)^3 for a normal x, accepted by a cheap squeeze or else the exact log test.
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.next_normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = open_unit(rng);
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return std::log(d) + std::log(v);
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return std::log(d) + std::log(v);
  }
}

double sample_gamma(RandomStream& rng, double shape, double scale) {
  BRIGADE_CHECK(scale > 0.0) << "gamma scale " << scale;
  return std::exp(sample_log_gamma(rng, shape)) * scale;
}

std::vector<double> sample_dirichlet(RandomStream& rng, double concentration, int64_t n) {
  BRIGADE_CHECK(n >= 1) << "Dirichlet over " << n << " components";
  // Normalised gammas, scaled by the largest in log space so the largest is exactly 1 and
  // the sum is never 0 however small the concentration.
  std::vector<double> p(static_cast<size_t>(n));
  for (double& x : p) x = sample_log_gamma(rng, concentration);
  const double top = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& x : p) {
    x = std::exp(x - top);
    sum += x;
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace brigade
