#pragma once
// Renyi differential privacy accounting for DP-FedAvg (McMahan et al., ICLR 2018): each round is
// a Poisson-subsampled Gaussian mechanism (every client joins with probability q; the clipped
// sum gets noise of multiplier z). Its RDP at order alpha is the bound of Mironov, Talwar and
// Zhang (2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism"): exact at integer
// orders, an upper bound at fractional ones, as Google dp_accounting's RDP accountant computes it;
// rounds compose by adding RDP (Mironov, CSF 2017), and (epsilon, delta) comes from the
// conversion of Canonne, Kamath and Steinke (2020), minimised over the orders. Hand-written: no
// C or C++ library in Debian does this accounting (Opacus and dp_accounting are Python).
//
// The neighbouring relation is adding or removing one client's whole data: the guarantee is
// per client, not per example.
#include <cstdint>
#include <vector>

namespace brigade {

// The RDP at `order` (> 1) of one sampled Gaussian mechanism: sampling probability q in [0, 1],
// noise multiplier z >= 0 (0: no privacy, +inf).
double sampled_gaussian_rdp(double q, double z, double order);

// The smallest epsilon over `orders` of a mechanism with RDP rdp[i] at orders[i], for delta.
// *best_order receives the order that gives it (may be null).
double rdp_to_epsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, double* best_order = nullptr);

class PrivacyAccountant {
 public:
  // The orders of dp_accounting's default: 1.1 ... 10.9 in steps of 0.1, 12 ... 63, and 128,
  // 256, 512, 1024.
  PrivacyAccountant();
  explicit PrivacyAccountant(std::vector<double> orders);

  // Composes `rounds` rounds of the sampled Gaussian mechanism (q, z).
  void compose(double q, double z, int64_t rounds = 1);
  double epsilon(double delta, double* best_order = nullptr) const;
  const std::vector<double>& rdp() const { return rdp_; }

 private:
  std::vector<double> orders_, rdp_;
};

}  // namespace brigade
