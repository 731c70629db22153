#include "brigade/fed/fed_aggregate.h"

#include <cmath>

namespace brigade {

void weighted_mean_update(const std::vector<ClientUpdate>& updates, int64_t n, float* out) {
  double total = 0;
  for (const ClientUpdate& u : updates) total += static_cast<double>(u.samples);
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const ClientUpdate& u : updates) sum += static_cast<double>(u.samples) * u.delta[i];
    out[i] = static_cast<float>(sum / total);
  }
}

void apply_control_deltas(const std::vector<ClientUpdate>& updates, int64_t n, int64_t clients,
                          float* control) {
  const double scale = 1.0 / static_cast<double>(clients);
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const ClientUpdate& u : updates) sum += u.control_delta[i];
    control[i] = static_cast<float>(control[i] + scale * sum);
  }
}

ServerOptimizer::ServerOptimizer(const ServerOptimizerConfig& config, int64_t n)
    : config_(config), n_(n) {
  if (config_.name != "avg") m_.assign(static_cast<size_t>(n), 0.0f);
  if (config_.name == "adam" || config_.name == "yogi") v_.assign(static_cast<size_t>(n), 0.0f);
}

void ServerOptimizer::apply(float* params, const float* delta) {
  const float lr = config_.lr;
  if (config_.name == "avg") {
    for (int64_t i = 0; i < n_; ++i) params[i] += lr * delta[i];
    return;
  }
  if (config_.name == "avgm") {
    for (int64_t i = 0; i < n_; ++i) {
      m_[i] = config_.momentum * m_[i] + delta[i];
      params[i] += lr * m_[i];
    }
    return;
  }
  const float b1 = config_.beta1, b2 = config_.beta2, tau = config_.tau;
  const bool yogi = config_.name == "yogi";
  for (int64_t i = 0; i < n_; ++i) {
    const float d = delta[i], d2 = d * d;
    m_[i] = b1 * m_[i] + (1 - b1) * d;
    if (yogi) {
      const float diff = v_[i] - d2;
      const float sign = diff > 0 ? 1.0f : (diff < 0 ? -1.0f : 0.0f);
      v_[i] = v_[i] - (1 - b2) * d2 * sign;
    } else {
      v_[i] = b2 * v_[i] + (1 - b2) * d2;
    }
    params[i] += lr * m_[i] / (std::sqrt(v_[i]) + tau);
  }
}

std::vector<std::pair<std::string, std::vector<float>*>> ServerOptimizer::state() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  if (!m_.empty()) out.emplace_back("server.m", &m_);
  if (!v_.empty()) out.emplace_back("server.v", &v_);
  return out;
}

}  // namespace brigade
