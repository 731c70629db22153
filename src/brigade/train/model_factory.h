#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brigade/model/cnn_classifier.h"
#include "brigade/model/gpt_config.h"
#include "brigade/model/model.h"
#include "brigade/optim/optimizer.h"
#include "brigade/runtime/config.h"

namespace brigade {

// The GPT shape a [model] section describes (mixture-of-experts and [lora] keys included).
GptConfig gpt_config(const ModelConfig& config);

// The CNN a [model] section with kind = "cnn" describes (model.channels, model.hidden).
CnnConfig cnn_config(const ModelConfig& config);

// The model a config describes, with activation buffers for micro-batches of max_batch
// examples. Parameters are zero until Model::initialize(). recompute_blocks: a GPT keeps only
// each block's input and re-runs its forward in backward (train.recompute = "block").
std::unique_ptr<Model> make_model(const ModelConfig& config, int64_t max_batch,
                                  bool recompute_blocks = false);

// The whole model's parameter layout (tp = 1), without allocating a GPT's buffers: the names
// train.freeze and checkpoints use.
ParamLayout model_param_layout(const ModelConfig& config);

// The optimizer settings of a config's [train] section.
OptimizerConfig optimizer_config(const TrainConfig& train);
// The same with freeze = freeze_patterns(config): what a training run's optimizer uses.
OptimizerConfig optimizer_config(const Config& config);

// What training keeps frozen: train.freeze, plus, with LoRA adapters (lora.rank > 0), every
// tensor that is not an adapter (lora_base_freeze_patterns, model/lora.h).
std::vector<std::string> freeze_patterns(const Config& config);

}  // namespace brigade
