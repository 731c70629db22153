#pragma once
// The coordinator's arithmetic (McMahan et al. 2017; Karimireddy et al. 2020; Reddi et al.
// 2021): the round's mean update, weighted by the clients' example counts, SCAFFOLD's global
// control variate, and the server optimizer that turns the mean update into the next global
// model. Pure functions over flat f32 vectors, so each is tested against a naive reference.
#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

// One client's answer as the coordinator aggregates it.
struct ClientUpdate {
  int client = 0;
  int64_t samples = 0;                   // the client's example count (its FedAvg weight)
  const float* delta = nullptr;          // its local model minus the global model
  const float* control_delta = nullptr;  // SCAFFOLD: c_i+ - c_i; else null
};

// out = sum_i samples_i * delta_i / sum_i samples_i, accumulated in double in the order of
// `updates` (the caller sorts them by client, so the result does not depend on arrival order).
void weighted_mean_update(const std::vector<ClientUpdate>& updates, int64_t n, float* out);

// SCAFFOLD's server control step: c += (1 / clients) * sum_i control_delta_i, where `clients`
// is the number of clients in the federation (the paper's |S| / N times the mean over S).
void apply_control_deltas(const std::vector<ClientUpdate>& updates, int64_t n, int64_t clients,
                          float* control);

struct ServerOptimizerConfig {
  std::string name = "avg";  // "avg" | "avgm" | "adam" | "yogi"
  float lr = 1.0f;
  float momentum = 0.9f;  // avgm
  float beta1 = 0.9f;     // adam, yogi
  float beta2 = 0.99f;    // adam, yogi
  float tau = 1e-3f;      // adam, yogi
};

// The server optimizer of the round's mean update Delta (the negative pseudo-gradient), in the
// forms of Flower's strategies:
//   avg   x += lr Delta                                    (FedAvg: lr = 1 is plain averaging)
//   avgm  m = momentum m + Delta;  x += lr m               (FedAvgM, Hsu et al. 2019)
//   adam  m = b1 m + (1 - b1) Delta;  v = b2 v + (1 - b2) Delta^2;  x += lr m / (sqrt(v) + tau)
//   yogi  as adam with v = v - (1 - b2) Delta^2 sign(v - Delta^2)    (Reddi et al. 2021)
// State (m, v) starts at zero and is checkpointed through state().
class ServerOptimizer {
 public:
  ServerOptimizer(const ServerOptimizerConfig& config, int64_t n);
  void apply(float* params, const float* delta);
  // Named state buffers (empty for avg), in a fixed order.
  std::vector<std::pair<std::string, std::vector<float>*>> state();

 private:
  ServerOptimizerConfig config_;
  int64_t n_;
  std::vector<float> m_, v_;
};

}  // namespace brigade
