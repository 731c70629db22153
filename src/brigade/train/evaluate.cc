#include "brigade/train/evaluate.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace brigade {

EvalSums sum_over_ranks(const EvalSums& local, Communicator* world) {
  if (!world || world->size() == 1) return local;
  using Fields = std::array<double, 4>;
  const Fields mine = {local.loss_sum, local.examples, local.correct, local.weight};
  std::vector<Fields> all(static_cast<size_t>(world->size()));
  world->all_gather_bytes(reinterpret_cast<const uint8_t*>(mine.data()),
                          reinterpret_cast<uint8_t*>(all.data()), sizeof(Fields));
  EvalSums sums;
  for (const Fields& f : all) {
    sums.loss_sum += f[0];
    sums.examples += f[1];
    sums.correct += f[2];
    sums.weight += f[3];
  }
  return sums;
}

EvalSums evaluate(Model& model, const Dataset& dataset, Batch& batch, int64_t micro_batch,
                  int64_t max_batches, int64_t shard, int64_t shards) {
  EvalIterator it(dataset, micro_batch, max_batches);
  EvalSums sums;
  for (int64_t k = shard; k < it.num_batches(); k += shards) {
    it.fill(batch, k);
    // The task loss: without a MoE model's load-balancing term (aux_loss() is 0 otherwise).
    const double loss = static_cast<double>(model.forward(batch)) - model.aux_loss();
    if (dataset.masks_targets()) {
      const int64_t n = batch.size * batch.seq_len;
      const auto valid = static_cast<double>(std::count_if(
          batch.targets.begin(), batch.targets.begin() + n, [](int32_t t) { return t >= 0; }));
      sums.loss_sum += loss * valid;
      sums.weight += valid;
    } else {
      sums.loss_sum += loss * static_cast<double>(batch.size);
    }
    sums.examples += static_cast<double>(batch.size);
    sums.correct += static_cast<double>(model.correct_predictions());  // 0 unless a classifier
  }
  return sums;
}

}  // namespace brigade
