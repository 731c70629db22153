#pragma once
// Finite-difference gradient check shared by the model tests: perturbs a few elements of
// every tensor of a model and compares central differences of the loss with the analytic
// gradient of one forward + backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "brigade/model/model.h"
#include "brigade/tensor/rng.h"

namespace brigade::testing {

struct GradCheckOptions {
  float eps = 1e-2f;   // central-difference step, in float
  float atol = 1e-3f;  // |fd - analytic| <= atol + rtol * |analytic|
  float rtol = 2e-2f;
  int per_tensor = 4;  // elements checked per tensor (first, last, random in between)
};

// Overwrites every parameter with a random value around its initialisation so that no
// gradient is trivially structured (unit gains, zero biases): p = init + std * N(0,1).
inline void perturb_params(Model& model, float std, uint64_t seed) {
  std::vector<float> noise(static_cast<size_t>(model.num_params()));
  fill_normal(noise.data(), model.num_params(), 0.0f, std, seed, hash_name("perturb"));
  for (int64_t i = 0; i < model.num_params(); ++i) model.params()[i] += noise[i];
}

// Returns how many elements were checked. Every failure is reported with the tensor name.
inline int check_gradients(Model& model, const Batch& batch, const GradCheckOptions& opt) {
  model.zero_grads();
  model.forward(batch);
  model.backward(batch, 1.0f);
  const std::vector<float> analytic(model.grads(), model.grads() + model.num_params());

  int checked = 0;
  for (const ParamSpec& spec : model.layout().specs()) {
    std::vector<int64_t> picks = {0, spec.numel - 1};
    for (int k = 2; k < opt.per_tensor; ++k)
      picks.push_back(
          static_cast<int64_t>(random_uniform(7, hash_name(spec.name), static_cast<uint64_t>(k)) *
                               static_cast<float>(spec.numel)));
    std::sort(picks.begin(), picks.end());
    picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
    for (int64_t e : picks) {
      float* p = model.params() + spec.offset + e;
      const float saved = *p;
      *p = saved + opt.eps;
      const float up = model.forward(batch);
      *p = saved - opt.eps;
      const float down = model.forward(batch);
      *p = saved;
      const double fd = (static_cast<double>(up) - down) / (2.0 * opt.eps);
      const double an = analytic[static_cast<size_t>(spec.offset + e)];
      EXPECT_LE(std::abs(fd - an), opt.atol + opt.rtol * std::abs(an))
          << spec.name << "[" << e << "]: finite difference " << fd << " analytic " << an;
      ++checked;
    }
  }
  return checked;
}

}  // namespace brigade::testing
