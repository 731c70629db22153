#include "brigade/fed/secagg/fixed_point.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace brigade::secagg {
namespace {

bool refuse(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return false;
}

}  // namespace

bool validate_fixed_point(const FixedPoint& fixed, std::string* why) {
  if (!std::isfinite(fixed.clip) || fixed.clip <= 0) {
    return refuse(why, fmt::format("fixed point: clip = {} (a finite bound > 0)", fixed.clip));
  }
  if (fixed.max_clients < 1 || fixed.max_clients > (int64_t{1} << 31) - 1) {
    return refuse(why,
                  fmt::format("fixed point: max_clients = {} (1 to 2^31 - 1)", fixed.max_clients));
  }
  return true;
}

std::optional<int64_t> quantize(const float* x, int64_t n, const FixedPoint& fixed, uint32_t* out,
                                std::string* why) {
  const double scale = fixed.scale();
  const double limit = static_cast<double>(fixed.max_magnitude());
  int64_t clipped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      refuse(why, fmt::format("value {} of the update is {}", i, x[i]));
      return std::nullopt;
    }
    double v = x[i];
    if (v > fixed.clip || v < -fixed.clip) {
      ++clipped;
      v = std::clamp(v, -static_cast<double>(fixed.clip), static_cast<double>(fixed.clip));
    }
    // The clamp after rounding keeps |q| <= M even where clip * scale rounds above M.
    const double q = std::clamp(std::nearbyint(v * scale), -limit, limit);
    out[i] = static_cast<uint32_t>(static_cast<int32_t>(q));
  }
  return clipped;
}

double fixed_to_real(uint32_t sum, const FixedPoint& fixed) {
  return static_cast<double>(static_cast<int32_t>(sum)) / fixed.scale();
}

void dequantize_sum(const uint32_t* sum, int64_t n, const FixedPoint& fixed, float* out) {
  const double scale = fixed.scale();
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<double>(static_cast<int32_t>(sum[i])) / scale);
  }
}

}  // namespace brigade::secagg
