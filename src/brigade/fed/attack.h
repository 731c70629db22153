#pragma once
// Attack clients (fed.attack, fed.attackers), so that tests and benchmarks can show what the
// robust aggregation rules (optim/robust_aggregate.h) hold off and what plain FedAvg does not. An
// attacking client trains as usual and then corrupts what it sends:
//
//   sign_flip   the update negated
//   scale       the update times fed.attack_scale
//   noise       a Gaussian vector of standard deviation fed.attack_noise instead of the update
//   label_flip  trains on label classes - 1 - y (a data-poisoning attack; see flip_label)
//   nan         one value of the update set to NaN and a NaN loss reported, as a client whose
//               training diverged sends (the coordinator must refuse it, and not wait for it)
#include <cstdint>
#include <string>

namespace brigade {

struct AttackConfig {
  std::string kind = "none";
  double scale = 10;
  double noise = 1;
};

// Whether client `client` attacks when clients 0 .. attackers - 1 do.
inline bool is_attacker(int client, int64_t attackers) {
  return client < attackers;
}

// Corrupts delta (n values) as `config.kind` says; label_flip and none leave it. The noise is
// drawn from `seed` (per client and round, so runs repeat).
void corrupt_update(const AttackConfig& config, uint64_t seed, float* delta, int64_t n);

inline int32_t flip_label(int32_t label, int32_t classes) {
  return classes - 1 - label;
}

}  // namespace brigade
