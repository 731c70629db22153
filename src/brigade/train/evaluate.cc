#include "brigade/train/evaluate.h"

#include <algorithm>

namespace brigade {

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
