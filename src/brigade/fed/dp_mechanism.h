#pragma once
// DP-FedAvg's mechanism at the coordinator (McMahan, Ramage, Talwar and Zhang, ICLR 2018), in
// its central form: every client is sampled independently with probability q, each update is
// clipped to L2 norm C, and the round's update is
//
//   Delta = (sum_k clip(delta_k, C) + N(0, (z C)^2 I)) / (q N)
//
// with the fixed denominator q N (the expected number of clients), so one client's presence
// changes the sum by at most C whatever the others do: the sensitivity the accountant
// (privacy_accountant.h) assumes. The updates are not weighted by example counts.
//
// The noise and the sample must be secret to whoever sees only the model: both are drawn from
// a 32-byte key that the coordinator makes with libsodium's randombytes at its first start and
// keeps in its state file, never in logs. Noise: ChaCha20 (crypto_stream_chacha20_ietf) per
// (round, attempt) through Box-Muller; sampling: SipHash (crypto_shorthash) of (round, attempt,
// client). A resumed coordinator reads the key back, so its rounds repeat bitwise.
#include <array>
#include <cstdint>
#include <vector>

namespace brigade {

using DpKey = std::array<uint8_t, 32>;

// A fresh key from the operating system's CSPRNG.
DpKey make_dp_key();

class DpMechanism {
 public:
  DpMechanism(double clip, double noise_multiplier, const DpKey& key);
  ~DpMechanism();
  DpMechanism(const DpMechanism&) = delete;
  DpMechanism& operator=(const DpMechanism&) = delete;

  // Whether `client` is in the Poisson sample of (round, attempt), with probability q.
  bool sampled(int client, int64_t round, int64_t attempt, double q) const;

  // out = the noised, clipped sum of `updates` (n values each) over expected_clients (q N).
  // Returns how many updates were longer than the clip and were scaled down.
  int64_t noised_mean(const std::vector<const float*>& updates, int64_t n, double expected_clients,
                      int64_t round, int64_t attempt, float* out);
  // out = (sum + noise) / expected_clients, for vectors already clipped (a client's share of
  // the noise under secure aggregation: expected_clients 1). sum and out may be the same.
  void noised_sum(const float* sum, int64_t n, double expected_clients, int64_t round,
                  int64_t attempt, float* out);

 private:
  double clip_, noise_;
  std::array<uint8_t, 32> noise_key_;
  std::array<uint8_t, 16> sample_key_;
  std::vector<uint64_t> words_;  // the round's ChaCha20 stream, reused
  std::vector<double> sum_;

  void add_noise(int64_t n, int64_t round, int64_t attempt);  // to sum_
  // out = (sum_ + noise) / expected_clients.
  void noise_and_divide(int64_t n, double expected_clients, int64_t round, int64_t attempt,
                        float* out);
};

}  // namespace brigade
