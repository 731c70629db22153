#include "brigade/ckpt/peft_adapter.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/model/lora.h"

namespace brigade {

void save_peft_adapter(const std::string& dir, const GptConfig& config, const ParamLayout& layout,
                       const float* params, const StMetadata& metadata) {
  if (!config.lora())
    throw ConfigError("the checkpoint has no LoRA adapters to export (lora.rank = 0)");
  std::vector<StTensorView> views;
  for (const ParamSpec& s : layout.specs()) {
    if (!is_lora_tensor(s.name)) continue;
    views.push_back({.name = kPeftPrefix + s.name,
                     .dtype = StDtype::kF32,
                     .shape = s.shape,
                     .data = params + s.offset,
                     .nbytes = s.numel * static_cast<int64_t>(sizeof(float))});
  }
  nlohmann::json targets = nlohmann::json::array();
  for (size_t i = 0; i < lora_target_names().size(); ++i) {
    if (config.lora_targets & (1u << i)) targets.push_back(lora_target_names()[i]);
  }
  const nlohmann::json adapter_config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", nullptr},
      {"r", config.lora_rank},
      {"lora_alpha", config.lora_alpha},
      {"lora_dropout", 0.0},
      // "attn.c_proj", not "c_proj": PEFT matches a target as a suffix of the module's name.
      {"target_modules", targets},
      {"fan_in_fan_out", true},
      {"bias", "none"},
      {"modules_to_save", nullptr},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"use_rslora", false},
      {"use_dora", false}};
  StMetadata md = metadata;
  md["format"] = "pt";
  make_dirs(dir);
  const std::string weights = dir + "/" + kPeftWeightsFile;
  write_safetensors(weights + ".tmp", views, md);
  rename_atomic(weights + ".tmp", weights);
  write_file_atomic(dir + "/" + kPeftConfigFile, adapter_config.dump(2) + "\n");
  fsync_dir(dir);
}

}  // namespace brigade
