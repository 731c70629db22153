#pragma once
// Folding LoRA adapters into the layers they adapt: W' = W + (alpha / r) B A, so a model with
// adapters becomes a plain GPT-2 that computes the same function (up to float rounding) and
// that every consumer of plain weights runs unchanged: `brigade export` (Hugging Face GPT-2),
// a KV-cache decoder, any tool that does not know the adapters.
#include "brigade/model/gpt_config.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

// config without its adapters: the base model's shape.
GptConfig without_lora(const GptConfig& config);

// Writes the merged base model: base_params (base_layout, the tp = 1 layout of a Gpt built from
// without_lora(config)) gets every tensor of params (layout, the tp = 1 layout of a Gpt built
// from config, adapters included), and each adapted weight W (out, in) plus scale * B A. With no
// adapters (lora_rank = 0) it copies. Throws ConfigError when a base tensor is missing from
// layout or has another shape (the two layouts describe different models).
void merge_lora_into_base(const GptConfig& config, const ParamLayout& layout, const float* params,
                          const ParamLayout& base_layout, float* base_params);

}  // namespace brigade
