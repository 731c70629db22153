#pragma once
// The GPT parameter layout on one tensor-parallel rank: GPT-2 names in forward order, this
// rank's shard shapes, and the offsets forward and backward read. With tp = 1 it is the whole
// model. Under tensor parallelism (Megatron):
//   wte                  vocab-parallel: rows [v0, v0 + Vl) of the vocab padded to tp * Vl
//   c_attn weight, bias  column-parallel by heads: this rank's NH/tp heads of q, of k and of v
//   attn.c_proj weight   row-parallel: the input columns of those heads
//   mlp.c_fc             column-parallel: 4C/tp output features
//   mlp.c_proj weight    row-parallel: the same 4C/tp input features
//   wpe, layernorms, row-parallel biases: replicated
// Every shard records its full shape and place (ParamSpec::full_index), so initialisation gives
// each rank the slice of the tp = 1 tensor and checkpoints can gather the tp = 1 layout.
#include <cstdint>
#include <vector>

#include "brigade/model/gpt_config.h"
#include "brigade/model/lora.h"
#include "brigade/model/model.h"
#include "brigade/model/moe/moe_params.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct GptShard {
  int tp_size = 1;
  int tp_rank = 0;
  int64_t vocab_padded = 0;  // Vp: vocab rounded up to a multiple of tp_size (= V at tp = 1)
  int64_t vocab_local = 0;   // Vl = Vp / tp: wte rows and logit columns held here
  int64_t vocab_begin = 0;   // v0 = tp_rank * Vl
  int64_t heads_local = 0;   // NH / tp
  int64_t c_local = 0;       // C / tp: features of this rank's heads (per q, k, v)
  int64_t fc_local = 0;      // 4C / tp
};

// Throws ConfigError naming the factor when tp < 1 or n_head or 4 * d_model is not a multiple
// of tp (the vocab is padded instead). With sequence_parallel, seq_len must be a multiple too.
// Call it before launch to reject a layout early; make_gpt_shard calls it as well.
void validate_tensor_parallel(const GptConfig& config, int tp, bool sequence_parallel);

GptShard make_gpt_shard(const GptConfig& config, int tp_size, int tp_rank);

// One block's parameter offsets in the flat buffer. A mixture-of-experts block
// (GptConfig::moe_block) has no mlp.c_fc / mlp.c_proj (their offsets are -1): its MLP is the
// router and experts of `moe`, named h.{l}.mlp.router.weight, h.{l}.mlp.experts.{e}.* after ln_2.
struct GptBlockParams {
  int64_t ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b;
  int64_t ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
  // LoRA adapters (GptConfig::lora_targets; -1 offsets otherwise). The attention half's sit after
  // attn.c_proj.bias and the MLP half's after mlp.c_proj.bias, so each half stays one range
  // ([begin, ln2_w) and [ln2_w, end)) whose gradients backward finishes together.
  LoraParams lora_attn, lora_attn_proj, lora_fc, lora_fc_proj;
  int64_t begin, end;  // [begin, end): the block's whole range
  bool is_moe = false;
  MoeParams moe;  // is_moe only: every expert (no expert parallelism in the GPT yet)
};

struct GptParams {
  int64_t wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0;
  std::vector<GptBlockParams> blocks;
};

// Appends the model's tensors to layout (empty) and its layer groups (embeddings, each block,
// ln_f) to groups; returns the offsets. Initialisation: normal(0, 0.02) for wte, wpe and every
// matrix except the two c_proj weights, which get 0.02/sqrt(2 n_layer) (GPT-2's residual
// scaling); biases zero; LayerNorm gains one; vocab padding rows zero. MoE blocks: the router
// and c_fc get normal(0, 0.02), each expert's c_proj the same scaled std as a dense c_proj.
// LoRA adapters: lora_A uniform in +-1/sqrt(in) (PEFT's Kaiming-uniform), lora_B zero; under
// tensor parallelism a column-parallel layer's B and a row-parallel layer's A are split as the
// layer's weight. Throws ConfigError for MoE blocks under tensor parallelism (not supported yet).
GptParams build_gpt_layout(const GptConfig& config, const GptShard& shard, ParamLayout& layout,
                           std::vector<ParamGroup>& groups);

// Block l's offsets in a layout that holds its tensors under their GPT-2 names (a pipeline
// stage's, a generation stage's), adapters included; a MoE block with experts [e0, e1) only (so
// offsets differ from the whole model's when experts are left out). Throws std::out_of_range
// for a tensor the layout lacks.
GptBlockParams block_params_by_name(const ParamLayout& layout, const GptConfig& config, int64_t l,
                                    int64_t e0 = 0, int64_t e1 = 0);

}  // namespace brigade
