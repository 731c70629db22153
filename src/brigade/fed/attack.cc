#include "brigade/fed/attack.h"

#include <cmath>
#include <limits>

#include "brigade/fed/local_training.h"

namespace brigade {

namespace {

// A uniform double in (0, 1] from splitmix64 words.
double uniform(uint64_t* state) {
  *state = mix_seed(*state, 0x5eed);
  return (static_cast<double>(*state >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

void corrupt_update(const AttackConfig& config, uint64_t seed, float* delta, int64_t n) {
  if (config.kind == "sign_flip") {
    for (int64_t i = 0; i < n; ++i) delta[i] = -delta[i];
  } else if (config.kind == "scale") {
    const auto s = static_cast<float>(config.scale);
    for (int64_t i = 0; i < n; ++i) delta[i] *= s;
  } else if (config.kind == "noise") {
    uint64_t state = seed;
    for (int64_t i = 0; i < n; ++i) {  // Box-Muller, one value per pair
      const double r = std::sqrt(-2.0 * std::log(uniform(&state)));
      delta[i] = static_cast<float>(config.noise * r * std::cos(2 * M_PI * uniform(&state)));
    }
  } else if (config.kind == "nan" && n > 0) {
    delta[0] = std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace brigade
