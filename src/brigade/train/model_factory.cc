#include "brigade/train/model_factory.h"

#include "brigade/model/gpt.h"
#include "brigade/model/mlp_classifier.h"

namespace brigade {

std::unique_ptr<Model> make_model(const ModelConfig& config, int64_t max_batch) {
  if (config.kind == "mlp") {
    MlpConfig mlp;
    mlp.hidden = config.hidden;
    return std::make_unique<MlpClassifier>(mlp, max_batch);
  }
  GptConfig gpt{.vocab = config.vocab,
                .seq_len = config.seq_len,
                .d_model = config.d_model,
                .n_layer = config.n_layer,
                .n_head = config.n_head};
  return std::make_unique<Gpt>(gpt, max_batch);
}

}  // namespace brigade
