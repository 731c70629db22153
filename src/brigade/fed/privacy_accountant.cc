#include "brigade/fed/privacy_accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace brigade {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)) without overflow.
double log_add(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

// log(erfc(x)), also where erfc underflows (its asymptotic series for large x).
double log_erfc(double x) {
  if (x < 20) return std::log(std::erfc(x));
  const double r = 1.0 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) +
         std::log1p(-0.5 * r + 0.75 * r * r - 1.875 * r * r * r);
}

// log |C(alpha, k)| for real alpha: log |Gamma(alpha + 1)| - log Gamma(k + 1) -
// log |Gamma(alpha - k + 1)|.
double log_abs_binomial(double alpha, double k) {
  return std::lgamma(alpha + 1) - std::lgamma(k + 1) - std::lgamma(alpha - k + 1);
}

// log(A_alpha) for integer alpha: the binomial expansion of E[(1 - q + q e^{...})^alpha].
double log_a_integer(double q, double z, int64_t alpha) {
  double log_a = -kInf;
  for (int64_t i = 0; i <= alpha; ++i) {
    const double k = static_cast<double>(i);
    const double log_coef = std::lgamma(static_cast<double>(alpha) + 1) - std::lgamma(k + 1) -
                            std::lgamma(static_cast<double>(alpha - i) + 1);
    const double term = log_coef + k * std::log(q) +
                        static_cast<double>(alpha - i) * std::log1p(-q) + (k * k - k) / (2 * z * z);
    log_a = log_add(log_a, term);
  }
  return log_a;
}

// log(A_alpha) for fractional alpha: the two series of Mironov et al. (2019, section 3.3), split
// at z0 = z^2 log(1/q - 1) + 1/2, with every term counted positive (as dp_accounting does): an
// upper bound of A_alpha, so epsilon is never under-reported, and free of the cancellation
// that the alternating signs of C(alpha, i) would bring.
double log_a_fractional(double q, double z, double alpha) {
  double log_a0 = -kInf, log_a1 = -kInf, last_s0 = -kInf, last_s1 = -kInf;
  const double z0 = z * z * std::log(1 / q - 1) + 0.5;
  for (int64_t i = 0; i < 1000; ++i) {
    const double k = static_cast<double>(i), j = alpha - k;
    const double log_coef = log_abs_binomial(alpha, k);
    const double log_t0 = log_coef + k * std::log(q) + j * std::log1p(-q);
    const double log_t1 = log_coef + j * std::log(q) + k * std::log1p(-q);
    const double log_e0 = std::log(0.5) + log_erfc((k - z0) / (std::sqrt(2.0) * z));
    const double log_e1 = std::log(0.5) + log_erfc((z0 - j) / (std::sqrt(2.0) * z));
    const double log_s0 = log_t0 + (k * k - k) / (2 * z * z) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2 * z * z) + log_e1;
    log_a0 = log_add(log_a0, log_s0);
    log_a1 = log_add(log_a1, log_s1);
    const double total = log_add(log_a0, log_a1);
    // Stop once both series decrease and their terms no longer move the sum.
    if (log_s0 < last_s0 && log_s1 < last_s1 && std::max(log_s0, log_s1) < total - 30) break;
    last_s0 = log_s0;
    last_s1 = log_s1;
  }
  return log_add(log_a0, log_a1);
}

}  // namespace

double sampled_gaussian_rdp(double q, double z, double order) {
  if (q == 0) return 0;
  if (z == 0 || std::isinf(order)) return kInf;
  if (q == 1) return order / (2 * z * z);
  const double log_a = order == std::floor(order) ? log_a_integer(q, z, static_cast<int64_t>(order))
                                                  : log_a_fractional(q, z, order);
  return log_a / (order - 1);
}

double rdp_to_epsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, double* best_order) {
  double best = kInf, at = 0;
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    if (a <= 1.01 || std::isinf(rdp[i])) continue;  // the bound is unstable as a -> 1
    // delta <= sqrt(1 - exp(-KL)) already: no loss at all.
    // Otherwise Canonne, Kamath and Steinke (2020), Proposition 12, tighter than the classic
    // rdp + log(1 / delta) / (a - 1).
    const double eps =
        delta * delta + std::expm1(-rdp[i]) >= 0
            ? 0.0
            : rdp[i] + std::log1p(-1 / a) - (std::log(delta) + std::log(a)) / (a - 1);
    if (eps < best) {
      best = eps;
      at = a;
    }
  }
  if (best_order) *best_order = at;
  return std::max(best, 0.0);
}

PrivacyAccountant::PrivacyAccountant() {
  for (int x = 1; x < 100; ++x) orders_.push_back(1 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders_.push_back(a);
  for (double a : {128.0, 256.0, 512.0, 1024.0}) orders_.push_back(a);
  rdp_.assign(orders_.size(), 0.0);
}

PrivacyAccountant::PrivacyAccountant(std::vector<double> orders) : orders_(std::move(orders)) {
  rdp_.assign(orders_.size(), 0.0);
}

void PrivacyAccountant::compose(double q, double z, int64_t rounds) {
  for (size_t i = 0; i < orders_.size(); ++i) {
    rdp_[i] += static_cast<double>(rounds) * sampled_gaussian_rdp(q, z, orders_[i]);
  }
}

double PrivacyAccountant::epsilon(double delta, double* best_order) const {
  return rdp_to_epsilon(orders_, rdp_, delta, best_order);
}

}  // namespace brigade
