#pragma once
// LoRA adapters as Hugging Face PEFT saves them, so that
//   model = GPT2LMHeadModel.from_pretrained(dir); model = PeftModel.from_pretrained(model, dir)
// loads a brigade LoRA run: adapter_config.json (peft_type "LORA", r, lora_alpha, the targets as
// module-name suffixes, fan_in_fan_out = true because GPT-2's layers are Conv1D) and
// adapter_model.safetensors with PEFT's tensor names,
//   base_model.model.transformer.h.{l}.attn.c_attn.lora_A.weight   (r, in)
//   base_model.model.transformer.h.{l}.attn.c_attn.lora_B.weight   (out, r)
// in the shapes of our layout (PEFT's lora_A / lora_B are nn.Linear(in, r) / nn.Linear(r, out)
// whatever the base layer; with fan_in_fan_out it adds (s B A)^T to the Conv1D's (in, out)
// weight). The base model itself is save_hf_gpt2's folder of the adapters' base weights.
#include <string>

#include "brigade/ckpt/safetensors.h"
#include "brigade/model/gpt_config.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

inline constexpr char kPeftConfigFile[] = "adapter_config.json";
inline constexpr char kPeftWeightsFile[] = "adapter_model.safetensors";
inline constexpr char kPeftPrefix[] = "base_model.model.transformer.";

// Writes the adapters of params (layout of a tp = 1 Gpt built from config, which has lora()) into
// dir, atomically per file. ConfigError when config has no adapters.
void save_peft_adapter(const std::string& dir, const GptConfig& config, const ParamLayout& layout,
                       const float* params, const StMetadata& metadata = {});

}  // namespace brigade
