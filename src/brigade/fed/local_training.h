#pragma once
// A federated client's round: start from the global model, train on the client's own examples
// with its own optimizer, and report the update (the local model minus the global one).
//
//   fedavg    plain local SGD (McMahan et al. 2017)
//   fedprox   the local gradient gets mu (w - w_global), the proximal term (Li et al. 2020)
//   scaffold  each local step also moves the weights by -lr (c - c_i), beside the optimizer (so
//             momentum does not amplify it; NIID-Bench does the same), and afterwards the
//             client's control variate becomes c_i+ = c_i - c + (w_global - w) / (K lr) over its K
//             local steps (option II of Karimireddy et al. 2020); the client reports c_i+ - c_i
//
// The optimizer (train.optimizer, lr, momentum, weight decay) is fresh every round, as in
// NIID-Bench, and the learning rate constant (train.lr). A round's example order depends only on
// (run seed, client, round, epoch), so a retried or resumed round trains exactly as before.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/data/loader.h"
#include "brigade/model/batch.h"
#include "brigade/model/model.h"
#include "brigade/optim/optimizer.h"

namespace brigade {

struct LocalTrainingConfig {
  std::string strategy = "fedavg";  // "fedavg" | "fedprox" | "scaffold"
  float mu = 0.0f;                  // fedprox
  int64_t local_epochs = 1;
  int64_t local_steps = 0;  // > 0: this many steps instead of epochs
  int64_t batch = 64;
  float lr = 0.01f;
  OptimizerConfig optimizer;
  uint64_t seed = 0;
  bool flip_labels = false;  // fed.attack = "label_flip" (classifiers): train on classes - 1 - y
  int32_t classes = 10;
};

struct LocalResult {
  int64_t steps = 0;    // optimizer steps taken
  int64_t samples = 0;  // the client's example count (its weight)
  int64_t correct = 0;  // correct predictions over the last epoch's batches
  int64_t seen = 0;     // examples of the last epoch
  double loss = 0;      // their mean loss
};

class LocalTrainer {
 public:
  // The model's activation buffers must hold config.batch examples; data is the client's own
  // (images and labels, or windows of tokens), and must outlive the trainer.
  LocalTrainer(const LocalTrainingConfig& config, Model& model, const Dataset& data, int client);

  // Trains round `round` from `global` (num_params values). delta receives w - w_global. For
  // scaffold, control is the global c, client_control is c_i (updated in place to c_i+) and
  // control_delta receives c_i+ - c_i; otherwise the three are null.
  LocalResult train(int64_t round, const float* global, const float* control, float* client_control,
                    float* delta, float* control_delta);

 private:
  void fill_batch(const std::vector<int64_t>& order, int64_t first, int64_t count);

  LocalTrainingConfig config_;
  Model& model_;
  const Dataset& data_;
  int client_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<StateView> optimizer_state_;
  Batch batch_;
  std::vector<int64_t> order_;
};

// A seeded permutation of [0, n): Fisher-Yates over splitmix64, which is specified bit for bit
// (std::shuffle's use of its generator is not), so every platform trains the same order.
void seeded_permutation(uint64_t seed, std::vector<int64_t>& order, int64_t n);

// splitmix64 of a few words: independent streams for (seed, client, round, epoch).
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0);

}  // namespace brigade
