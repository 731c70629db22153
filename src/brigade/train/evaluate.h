#pragma once
#include <cstdint>

#include "brigade/data/loader.h"
#include "brigade/model/model.h"

namespace brigade {

struct EvalResult {
  double loss = 0;       // mean over examples
  int64_t examples = 0;
  double accuracy = -1;  // classifiers only, else -1
};

// Mean loss of model over the first max_batches micro-batches of dataset, in index order.
// batch must have been made by dataset.make_batch(micro_batch).
EvalResult evaluate(Model& model, const Dataset& dataset, Batch& batch, int64_t micro_batch,
                    int64_t max_batches);

}  // namespace brigade
