#pragma once
#include <cstdint>

#include "brigade/comm/communicator.h"
#include "brigade/data/loader.h"
#include "brigade/model/model.h"

namespace brigade {

// Sums over the evaluated examples; combine shards by adding, then call loss()/accuracy().
struct EvalSums {
  double loss_sum = 0;  // sum over examples of each example's mean loss (see weight)
  double examples = 0;
  double correct = 0;  // classifiers only
  // What loss_sum is a sum over when it is not examples: on data with masked targets
  // (Dataset::masks_targets) each batch's mean loss counts once per valid target, so loss() is
  // the mean over the evaluated targets (what bits per byte assume). 0: examples.
  double weight = 0;
  double loss() const {
    const double w = weight > 0 ? weight : examples;
    return w > 0 ? loss_sum / w : 0.0;
  }
  double accuracy() const { return examples > 0 ? correct / examples : 0.0; }
};

// Evaluates micro-batches k = shard, shard + shards, ... of the first max_batches
// micro-batches of dataset (in index order), so `shards` data-parallel ranks split one
// validation pass. batch must have been made by dataset.make_batch(micro_batch).
// Collective over world (null: one process): every rank's sums added in double, in rank order, so
// that a validation pass split over any number of ranks gives the same figures to ~1e-15.
EvalSums sum_over_ranks(const EvalSums& local, Communicator* world);

EvalSums evaluate(Model& model, const Dataset& dataset, Batch& batch, int64_t micro_batch,
                  int64_t max_batches, int64_t shard = 0, int64_t shards = 1);

}  // namespace brigade
