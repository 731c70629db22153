#pragma once
// A pipeline stage of the GPT (parallel/pipeline/pipeline_stage.h): the blocks [first_layer,
// end_layer), with the token + position embedding in front on the first stage and ln_f, the
// unembedding tied to wte and the cross-entropy behind on the last. The arithmetic is the
// whole model's (gpt_block.h, gpt_head.h), tensor-parallel inside when given a TpContext, so a
// stage computes bit for bit what Gpt computes for the same layers.
//
// Parameters. The stage owns a flat buffer of only its tensors, under their GPT-2 names and
// (under tensor parallelism) as this tp rank's shards, in forward order: [wte, wpe] on the
// first stage, the blocks, then [ln_f.weight, ln_f.bias, wte] on the last (wte once when one
// stage is both). initialize(seed) gives each tensor exactly the single-process Gpt's values
// (initialisation is per tensor name and element index). wte lives on the first and on the last
// stage: after backward their gradients must be summed (parallel/pipeline/tied_embedding.h),
// which keeps the two copies identical through any deterministic optimizer step.
//
// Activations. Everything a micro-batch's backward needs lives in the executor's `saved`
// buffer: the embedding output (first stage), every block's BlockActivations, and the head's
// ln_f output, logits and log-sum-exp (last stage). The stage computes in one working set of
// activations and copies it into `saved` after each block (and back before its backward),
// because the block functions work on BlockActivations' own vectors; the copies are O(BT C)
// per block against the block's O(BT C^2) matmuls.
//
// Backward is not split: backward_input computes the input and the weight gradients together
// (the block functions fuse them per matmul) and backward_weight does nothing. Schedules with a
// split backward (ZB-H1) run correctly, but without their gain: B costs what a fused backward
// costs. Splitting needs block_backward_* variants that take the weight-gradient matmuls out.
#include <cstdint>
#include <vector>

#include "brigade/model/flat_buffer.h"
#include "brigade/model/gpt_block.h"
#include "brigade/model/gpt_config.h"
#include "brigade/model/gpt_head.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/param_spec.h"
#include "brigade/parallel/pipeline/pipeline_stage.h"
#include "brigade/parallel/tensor/tp_context.h"

namespace brigade {

struct GptStageConfig {
  GptConfig model;
  int first_layer = 0;  // this stage's blocks [first_layer, end_layer)
  int end_layer = 0;
  int64_t micro_batch = 1;  // B: sequences per micro-batch, each of model.seq_len tokens
};

// Parameter count of each block at tp = 1, with the embeddings (wte + wpe) added to block 0 and
// ln_f plus the tied head's copy of wte to the last block: what each stage holds, for
// balance_layers() (parallel/pipeline/layer_partition.h).
std::vector<int64_t> gpt_layer_params(const GptConfig& config);

class GptStage : public PipelineStage {
 public:
  // Throws ConfigError for a bad model config, an empty or out-of-range block range, a
  // micro-batch < 1, or a tp degree the model cannot be cut into (gpt_layout.h). With sequence
  // parallelism B * seq_len must be a multiple of tp.
  GptStage(const GptStageConfig& config, const TpContext& tp = {});

  const GptConfig& model_config() const { return config_.model; }
  const GptShard& shard() const { return shard_; }
  bool is_first() const { return config_.first_layer == 0; }
  bool is_last() const { return config_.end_layer == config_.model.n_layer; }

  // This stage's tensors (names, this rank's shard shapes, offsets in params()/grads()).
  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  int64_t num_params() const { return layout_.total(); }
  void initialize(uint64_t seed) { layout_.initialize(params_.data(), seed); }
  // Backward accumulates (+=): zero once per step.
  void zero_grads();

  // The tied embedding: wte's offset in params()/grads(), -1 when the stage has none (neither
  // first nor last). A last stage that is not also the first holds the tied copy: count it out
  // of a global gradient norm, where wte must appear once.
  int64_t wte_offset() const { return has_wte_ ? w_.wte : -1; }
  int64_t wte_numel() const;
  bool holds_tied_copy() const { return has_wte_ && !is_first(); }

  // The step's global batch of m micro-batches, each B * seq_len tokens: tokens (m B T) read by
  // the first stage, targets (m B T; < 0 ignored) by the last (either may be null on a stage
  // that does not read it). Micro-batch mb is [mb B T, (mb + 1) B T). The last stage counts the
  // valid targets of all m micro-batches, so the summed loss is the mean over the global batch,
  // as Gpt::forward computes it on the whole batch. Not copied: must outlive the step.
  void set_batch(const int32_t* tokens, const int32_t* targets, int micro_batches);

  // Activations entering / leaving: this rank's rows of the residual stream (B T, C), or
  // (B T / tp, C) under sequence parallelism.
  int64_t input_floats() const override { return is_first() ? 0 : rows_ * C_; }
  int64_t output_floats() const override { return is_last() ? 0 : rows_ * C_; }
  int64_t saved_floats() const override { return saved_floats_; }
  float forward(int mb, const float* input, float* output, float* saved) override;
  void backward_input(int mb, const float* input, const float* dout, float* dinput,
                      float* saved) override;
  void backward_weight(int mb, const float* input, const float* saved) override;

 private:
  GptPass pass() const;
  // Where block j's (local index) activations and the head's sit in a saved buffer.
  const float* block_input(int j, const float* input, const float* saved) const;
  void save_block(float* saved, int j);
  void restore_block(const float* saved, int j);

  GptStageConfig config_;
  TpContext tp_;
  GptShard shard_;
  int64_t rows_ = 0, C_ = 0;
  bool has_wte_ = false;

  ParamLayout layout_;
  GptParams w_;  // offsets into params_; blocks[j] is block first_layer + j
  FlatBuffer params_, grads_;

  int64_t encoded_at_ = -1;  // saved: the embedding output (rows,C), first stage only
  int64_t blocks_at_ = 0;    // saved: block j's activations at blocks_at_ + j * block_floats_
  int64_t block_floats_ = 0;
  int64_t residual3_in_block_ = 0;  // the block output's offset inside a block's part
  int64_t head_at_ = -1;            // saved: the head's activations, last stage only
  int64_t saved_floats_ = 0;

  BlockActivations work_;  // the block being computed
  HeadActivations head_;
  GptScratch scratch_;
  std::vector<float> dres_;  // (rows,C): gradient of the residual stream

  const int32_t* tokens_ = nullptr;
  const int32_t* targets_ = nullptr;
  float inv_valid_ = 0.0f;  // 1 / valid targets of the global batch
};

}  // namespace brigade
