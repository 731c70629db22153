#include "brigade/train/evaluate.h"

#include "brigade/model/mlp_classifier.h"

namespace brigade {

EvalResult evaluate(Model& model, const Dataset& dataset, Batch& batch, int64_t micro_batch,
                    int64_t max_batches) {
  EvalIterator it(dataset, micro_batch, max_batches);
  auto* classifier = dynamic_cast<MlpClassifier*>(&model);
  double loss_sum = 0;
  int64_t correct = 0;
  EvalResult result;
  while (it.next(batch)) {
    loss_sum += static_cast<double>(model.forward(batch)) * static_cast<double>(batch.size);
    result.examples += batch.size;
    if (classifier) correct += classifier->correct_predictions();
  }
  if (result.examples > 0) {
    result.loss = loss_sum / static_cast<double>(result.examples);
    if (classifier) result.accuracy = static_cast<double>(correct) / result.examples;
  }
  return result;
}

}  // namespace brigade
