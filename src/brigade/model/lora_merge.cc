#include "brigade/model/lora_merge.h"

#include <algorithm>
#include <string>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/model/lora.h"

namespace brigade {

GptConfig without_lora(const GptConfig& config) {
  GptConfig base = config;
  base.lora_rank = 0;
  base.lora_targets = 0;
  return base;
}

void merge_lora_into_base(const GptConfig& config, const ParamLayout& layout, const float* params,
                          const ParamLayout& base_layout, float* base_params) {
  for (const ParamSpec& b : base_layout.specs()) {
    const ParamSpec* s = layout.find(b.name);
    if (!s || s->shape != b.shape)
      throw ConfigError("merging LoRA adapters: tensor \"" + b.name + "\" of the base model " +
                        shape_string(b.shape) + " is " +
                        (s ? "shaped " + shape_string(s->shape) : std::string("missing")) +
                        " in the adapted model");
    std::copy(params + s->offset, params + s->offset + s->numel, base_params + b.offset);
  }
  if (!config.lora()) return;
  const int64_t r = config.lora_rank;
  const float scale = config.lora_scale();
  for (const ParamSpec& w : base_layout.specs()) {
    const std::string suffix = ".weight";
    if (w.shape.size() != 2 || w.name.size() <= suffix.size()) continue;
    const std::string layer = w.name.substr(0, w.name.size() - suffix.size());
    const ParamSpec* a = layout.find(layer + ".lora_A.weight");
    if (!a) continue;
    const ParamSpec& bs = layout.at(layer + ".lora_B.weight");
    const int64_t out = w.shape[0], in = w.shape[1];
    // W (out, in) += scale * B (out, r) @ A (r, in)
    gemm(false, false, out, in, r, scale, params + bs.offset, r, params + a->offset, in, 1.0f,
         base_params + w.offset, in);
  }
}

}  // namespace brigade
