#include "brigade/train/model_factory.h"

#include "brigade/model/cnn_classifier.h"
#include "brigade/model/gpt.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/lora.h"
#include "brigade/model/mlp_classifier.h"

namespace brigade {

std::unique_ptr<Model> make_model(const ModelConfig& config, int64_t max_batch,
                                  bool recompute_blocks) {
  if (config.kind == ModelKind::kMlp) {
    MlpConfig mlp;
    mlp.hidden = config.hidden;
    return std::make_unique<MlpClassifier>(mlp, max_batch);
  }
  if (config.kind == ModelKind::kCnn)
    return std::make_unique<CnnClassifier>(cnn_config(config), max_batch);
  GptConfig gpt = gpt_config(config);
  gpt.recompute_blocks = recompute_blocks;
  return std::make_unique<Gpt>(gpt, max_batch);
}

ParamLayout model_param_layout(const ModelConfig& config) {
  if (config.is_classifier()) return make_model(config, 1)->layout();
  const GptConfig gpt = gpt_config(config);
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  build_gpt_layout(gpt, make_gpt_shard(gpt, 1, 0), layout, groups);
  return layout;
}

GptConfig gpt_config(const ModelConfig& config) {
  return GptConfig{.vocab = config.vocab,
                   .seq_len = config.seq_len,
                   .d_model = config.d_model,
                   .n_layer = config.n_layer,
                   .n_head = config.n_head,
                   .n_experts = config.n_experts,
                   .moe_top_k = static_cast<int>(config.moe_top_k),
                   .capacity_factor = config.capacity_factor,
                   .aux_loss_coef = config.aux_loss_coef,
                   .moe_every = config.moe_every,
                   .lora_rank = config.lora_rank,
                   .lora_alpha = config.lora_alpha,
                   .lora_targets = parse_lora_targets(config.lora_targets)};
}

std::vector<std::string> freeze_patterns(const Config& config) {
  std::vector<std::string> patterns = config.train.freeze;
  if (config.model.lora_rank > 0) {
    const std::vector<std::string> base = lora_base_freeze_patterns();
    patterns.insert(patterns.end(), base.begin(), base.end());
  }
  return patterns;
}

CnnConfig cnn_config(const ModelConfig& config) {
  CnnConfig cnn;  // 28x28x1 images (the Fashion-MNIST loader refuses others), 10 classes
  cnn.channels = config.channels;
  cnn.hidden = config.hidden;
  return cnn;
}

OptimizerConfig optimizer_config(const TrainConfig& t) {
  OptimizerConfig o;
  o.name = t.optimizer;
  o.beta1 = static_cast<float>(t.beta1);
  o.beta2 = static_cast<float>(t.beta2);
  o.eps = static_cast<float>(t.eps);
  o.weight_decay = static_cast<float>(t.weight_decay);
  o.momentum = static_cast<float>(t.momentum);
  o.nesterov = t.nesterov;
  o.freeze = t.freeze;
  return o;
}

OptimizerConfig optimizer_config(const Config& config) {
  OptimizerConfig o = optimizer_config(config.train);
  o.freeze = freeze_patterns(config);
  return o;
}

}  // namespace brigade
