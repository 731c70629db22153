#pragma once
// Conversion between our GPT (model/gpt.h) and Hugging Face transformers' GPT2LMHeadModel.
//
// The two models compute the same function (pre-LayerNorm blocks, eps 1e-5, tanh GELU =
// HF's "gelu_new", attention scaled by 1/sqrt(head_dim), q|k|v concatenated in c_attn's
// output, the head tied to wte), so conversion only renames and transposes:
//
//   ours                          HF                                      layout
//   wte.weight (V,C)              transformer.wte.weight (V,C)            same
//   wpe.weight (T,C)              transformer.wpe.weight (n_positions,C)  same
//   h.i.ln_1/ln_2/ln_f.*          transformer.h.i.ln_1 ... / ln_f.*       same
//   h.i.attn.c_attn.weight (3C,C) transformer.h.i.attn.c_attn.weight      (C,3C): transposed
//   h.i.attn.c_proj.weight (C,C)  transformer.h.i.attn.c_proj.weight      (C,C): transposed
//   h.i.mlp.c_fc.weight (4C,C)    transformer.h.i.mlp.c_fc.weight         (C,4C): transposed
//   h.i.mlp.c_proj.weight (C,4C)  transformer.h.i.mlp.c_proj.weight       (4C,C): transposed
//   biases                        same names under transformer.           same
//   h.i.mlp.router.weight (E,C)   transformer.h.i.mlp.router.weight       same (nn.Linear)
//   h.i.mlp.experts.e.c_fc/c_proj transformer.h.i.mlp.experts.e.*         as the dense MLP
//
// A mixture-of-experts model has no GPT2LMHeadModel counterpart: its config.json says
// model_type "brigade_gpt2_moe" (so transformers refuses it instead of loading a GPT-2 without
// MLPs) with Mixtral's keys num_local_experts, num_experts_per_tok, router_aux_loss_coef, and
// moe_every, capacity_factor; brigade import reads it back.
//
// Our weights are (out_features, in_features) like torch.nn.Linear; HF's GPT-2 uses Conv1D,
// which stores (in_features, out_features). lm_head.weight is not written: it is tied to
// transformer.wte.weight, and HF's own safetensors files omit it the same way.
//
// Reading accepts both naming variants seen in the wild: HF's GPT2LMHeadModel ("transformer."
// prefix) and the original gpt2 upload (no prefix, plus h.i.attn.bias / h.i.attn.masked_bias
// causal-mask buffers, which are ignored). An lm_head.weight, if present, must equal wte.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/ckpt/safetensors.h"
#include "brigade/model/gpt.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

inline constexpr char kHfConfigFile[] = "config.json";
inline constexpr char kHfWeightsFile[] = "model.safetensors";

// One tensor of a GPT2LMHeadModel state dict, row-major f32 in HF's layout.
struct HfTensor {
  std::string name;  // "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Where one of our parameters lives in HF's state dict.
struct HfName {
  std::string name;            // with the "transformer." prefix
  std::vector<int64_t> shape;  // HF's shape
  bool transposed = false;     // a Conv1D weight: HF[i][o] = ours[o][i]
};

// The HF name and shape of our parameter `spec` (a GPT parameter name, e.g. "h.3.mlp.c_fc.weight").
// Throws ConfigError for a name that is not one of our GPT-2 parameters.
HfName hf_gpt2_name(const ParamSpec& spec);

// Every tensor a GPT2LMHeadModel of this architecture holds (besides the tied lm_head), by
// HF name (with the "transformer." prefix) -> HF shape, in our forward order. Derived from config
// alone, so it checks the conversion independently of our layout.
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_expected_tensors(
    const GptConfig& config);

// Our parameters (layout of a Gpt built from config, values in params) as HF tensors, in our
// layout's order. Checks that layout covers exactly hf_gpt2_expected_tensors(config).
std::vector<HfTensor> to_hf_gpt2(const GptConfig& config, const ParamLayout& layout,
                                 const float* params);

// The config.json of a GPT2LMHeadModel with this architecture (no dropout, as we train).
nlohmann::json hf_gpt2_config_json(const GptConfig& config);

// The architecture a GPT-2 config.json describes. `path` names the file in messages. Throws
// IoError when a required key (vocab_size, n_positions, n_embd, n_layer, n_head) is missing or
// not a positive integer, and ConfigError naming the key, the value and what is allowed when it
// describes a model we cannot run (model_type other than "gpt2", another activation or
// LayerNorm epsilon, n_inner != 4 n_embd, untied embeddings, cross-attention, ...).
GptConfig gpt_config_from_hf(const nlohmann::json& config_json, const std::string& path);

// Fills params (layout of a Gpt built from config) from an HF safetensors file. Every tensor
// in the file must be an expected one (either naming variant), a mask buffer, or a tied
// lm_head.weight; every expected one must be present exactly once, with HF's shape and dtype
// F32, F16 or BF16. Throws IoError naming the file and the tensor otherwise.
void from_hf_gpt2(const SafetensorsFile& file, const GptConfig& config, const ParamLayout& layout,
                  float* params);

// Writes <dir>/model.safetensors (F32, metadata {"format": "pt"} plus `metadata`) and
// <dir>/config.json, each atomically (temporary file + rename). Creates dir. Throws IoError.
void save_hf_gpt2(const std::string& dir, const GptConfig& config, const ParamLayout& layout,
                  const float* params, const StMetadata& metadata = {});

// Reads <dir>/config.json. Throws as gpt_config_from_hf, or IoError if it is unreadable or not
// JSON.
GptConfig load_hf_gpt2_config(const std::string& dir);

// Reads <dir>/model.safetensors into params (see from_hf_gpt2). A folder holding only
// pytorch_model.bin or a sharded model.safetensors.index.json gets an IoError saying so.
void load_hf_gpt2_weights(const std::string& dir, const GptConfig& config,
                          const ParamLayout& layout, float* params);

}  // namespace brigade
