#include "brigade/fed/local_training.h"

#include <algorithm>
#include <cstring>

#include "brigade/fed/attack.h"

namespace brigade {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t state = a;
  for (uint64_t word : {b, c, d}) {
    state ^= splitmix64(state) + word;
  }
  return splitmix64(state);
}

void seeded_permutation(uint64_t seed, std::vector<int64_t>& order, int64_t n) {
  order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-shift maps 64 random bits onto [0, i] without a division.
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(splitmix64(state)) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
}

LocalTrainer::LocalTrainer(const LocalTrainingConfig& config, Model& model, const Dataset& data,
                           int client)
    : config_(config), model_(model), data_(data), client_(client) {
  optimizer_ = make_optimizer(config_.optimizer, model_.layout(), 0, model_.num_params());
  optimizer_state_ = optimizer_->state_tensors();
  batch_ = data_.make_batch(config_.batch);
}

void LocalTrainer::fill_batch(const std::vector<int64_t>& order, int64_t first, int64_t count) {
  data_.fill(batch_, &order[static_cast<size_t>(first)], count);
  if (!config_.flip_labels) return;
  for (int64_t b = 0; b < count; ++b) {
    int32_t& label = batch_.targets[static_cast<size_t>(b)];
    label = flip_label(label, config_.classes);
  }
}

LocalResult LocalTrainer::train(int64_t round, const float* global, const float* control,
                                float* client_control, float* delta, float* control_delta) {
  const int64_t n = model_.num_params();
  float* w = model_.params();
  std::memcpy(w, global, sizeof(float) * n);
  for (const StateView& s : optimizer_state_) std::fill(s.data, s.data + (s.end - s.begin), 0.0f);
  const bool prox = config_.strategy == "fedprox" && config_.mu > 0;
  const bool scaffold = config_.strategy == "scaffold";

  const int64_t count = data_.size();
  const int64_t per_epoch = (count + config_.batch - 1) / config_.batch;
  const int64_t steps =
      config_.local_steps > 0 ? config_.local_steps : config_.local_epochs * per_epoch;
  LocalResult result;
  result.samples = count;
  double loss_sum = 0;
  int64_t epoch = -1;
  // The last epoch's batches (the last per_epoch steps) are what the client reports.
  const int64_t report_from = std::max<int64_t>(0, steps - per_epoch);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t e = s / per_epoch, k = s % per_epoch;
    if (e != epoch) {
      epoch = e;
      seeded_permutation(mix_seed(config_.seed, static_cast<uint64_t>(client_),
                                  static_cast<uint64_t>(round), static_cast<uint64_t>(epoch)),
                         order_, count);
    }
    const int64_t first = k * config_.batch;
    fill_batch(order_, first, std::min(config_.batch, count - first));
    model_.zero_grads();
    const float loss = model_.forward(batch_);
    model_.backward(batch_, 1.0f);
    if (s >= report_from) {
      loss_sum += static_cast<double>(loss) * static_cast<double>(batch_.size);
      result.seen += batch_.size;
      result.correct += model_.correct_predictions();
    }
    float* g = model_.grads();
    if (prox) {
      for (int64_t i = 0; i < n; ++i) g[i] += config_.mu * (w[i] - global[i]);
    }
    optimizer_->step(w, g, 0, n, config_.lr, s + 1);
    if (scaffold) {
      // The correction goes to the weights, beside the optimizer (as NIID-Bench's SCAFFOLD):
      // through momentum it would be amplified by 1 / (1 - momentum). With plain SGD both are
      // the paper's y <- y - lr (g + c - c_i).
      for (int64_t i = 0; i < n; ++i) w[i] -= config_.lr * (control[i] - client_control[i]);
    }
    ++result.steps;
  }
  result.loss = result.seen > 0 ? loss_sum / static_cast<double>(result.seen) : 0.0;
  for (int64_t i = 0; i < n; ++i) delta[i] = w[i] - global[i];
  if (scaffold) {
    const double inv = 1.0 / (static_cast<double>(result.steps) * config_.lr);
    for (int64_t i = 0; i < n; ++i) {
      // c_i+ - c_i = -c + (w_global - w) / (K lr)
      const float next =
          static_cast<float>(client_control[i] - control[i] - static_cast<double>(delta[i]) * inv);
      control_delta[i] = next - client_control[i];
      client_control[i] = next;
    }
  }
  return result;
}

}  // namespace brigade
