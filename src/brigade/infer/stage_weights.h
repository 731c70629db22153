#pragma once
// One pipeline stage's weights for generation: the tensors of blocks [first_layer, end_layer)
// under their GPT-2 names (this tensor-parallel rank's shards), with wte and wpe in front on the
// first stage and ln_f and the tied wte behind on the last: the tensors a training GptStage holds
// (model/gpt_stage.h), in the same order, without its gradients and activations. Checkpoints are
// read into it by name (infer/checkpoint_model.h), so a stage loads only its own tensors.
#include <vector>

#include "brigade/model/gpt_config.h"
#include "brigade/model/gpt_decoder.h"
#include "brigade/model/tp/tp_context.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

class StageWeights {
 public:
  // config: a plain GPT (no LoRA adapters, no MoE blocks). Throws ConfigError for an empty or
  // out-of-range block range or a tp degree the model cannot be cut into. Keeps a copy of
  // config; tp.comm must outlive the stage.
  StageWeights(const GptConfig& config, int first_layer, int end_layer, const TpContext& tp);

  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  // What GptDecoder reads; valid while this object lives.
  DecoderWeights decoder_weights() const;

 private:
  GptConfig config_;
  TpContext tp_;
  GptShard shard_;
  int first_layer_, end_layer_;
  ParamLayout layout_;
  GptParams offsets_;  // into params_; blocks[j] is block first_layer_ + j
  std::vector<float> params_;
};

}  // namespace brigade
