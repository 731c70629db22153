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
// Backward is split (GptStageConfig::split_backward, gpt_block.h): backward_input (ZB-H1's B)
// computes the input gradients and, in the blocks, only the layernorm gains' and biases'
// gradients; backward_weight (W) adds the four matmul weight and bias gradients of every block
// from the output gradients B left in `saved`. The embedding (first stage) and the head's ln_f
// and tied unembedding (last stage) keep their whole backward in B. Where B leaves W's operands:
// dqkv over the saved qkv, dfc over the saved fch, and the two row-parallel output gradients
// (BT,C) over the saved residual2 and residual3 (free once the block's B has run: B reads its
// block from the working copy, and residual3 only as the next block's input, whose B ran first),
// so a micro-batch needs no more saved memory until its W than before; under sequence parallelism
// residual2/3 hold rows = BT/tp rows only, and each block's part grows by 2 BT C floats. With
// split_backward = false backward_input runs the fused block backward and backward_weight does
// nothing (for GPipe, 1F1B and interleaved, which run B and W back to back anyway).
//
// Mixture of experts (model.n_experts > 0; tp = 1 only: build_gpt_layout rejects MoE under
// tensor parallelism with a ConfigError naming model.n_experts and parallel.tp). A MoE block's
// router and experts hold the routing of the forward they ran last, so the stage keeps one set
// of MoE layers per micro-batch in flight (parallel/expert/stage_moe_layers.h); its backward
// stays fused (backward_input does it all, backward_weight nothing for it). Given an ep
// communicator, each MoE block's experts are sharded over it (parallel/expert/ep_moe_layer.h):
// the layout holds the router and only this ep rank's experts [r E/ep, (r+1) E/ep), under their
// global names (h.3.mlp.experts.5.c_fc.weight), and the ep ranks route the union of their
// micro-batch mb together (same stage, same schedule, so collectives line up). The loss gains
// each MoE block's aux_loss_coef * aux per micro-batch, averaged over the micro-batches, on the
// stage that holds the block: forward returns it on every stage (so the step's loss is the SUM
// over pipeline ranks of what forward returns, not the last stage's alone).
//
// Gradients under expert parallelism ("ep is carved out of dp": the ranks of an ep group see
// different data). The stage scales them so that AVERAGING each range over its replicas gives
// the gradient of the mean loss: expert_ranges() over the dp axis only (Mesh::comm(kDP): the
// ranks holding the same experts), dense_ranges() (everything else, the routers included) over
// dp x ep (Mesh::replica_comm()). A global gradient norm counts dense ranges once per dp x ep
// group and sums the expert ranges' squares over ep.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/flat_buffer.h"
#include "brigade/model/gpt_block.h"
#include "brigade/model/gpt_config.h"
#include "brigade/model/gpt_head.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/model.h"
#include "brigade/model/moe/moe_totals.h"
#include "brigade/model/moe/stage_moe_layers.h"
#include "brigade/model/pipeline_stage.h"
#include "brigade/model/tp/tp_context.h"
#include "brigade/tensor/param_spec.h"

namespace brigade {

struct GptStageConfig {
  GptConfig model;
  int first_layer = 0;  // this stage's blocks [first_layer, end_layer)
  int end_layer = 0;
  int64_t micro_batch = 1;     // B: sequences per micro-batch, each of model.seq_len tokens
  bool split_backward = true;  // defer the blocks' weight gradients to backward_weight (ZB-H1)
};

// Parameter count of each block at tp = 1, with the embeddings (wte + wpe) added to block 0 and
// ln_f plus the tied head's copy of wte to the last block: what each stage holds, for
// balance_layers() (parallel/pipeline/layer_partition.h).
std::vector<int64_t> gpt_layer_params(const GptConfig& config);

// Its flat parameter space is FlatParams', as a whole Model's: strategies run on either.
class GptStage : public PipelineStage, public FlatParams {
 public:
  // Throws ConfigError for a bad model config, an empty or out-of-range block range, a
  // micro-batch < 1, or a tp degree the model cannot be cut into (gpt_layout.h). With sequence
  // parallelism B * seq_len must be a multiple of tp. ep: the ep group over which MoE experts
  // are sharded (outlives the stage; null: every expert here); ConfigError unless it divides
  // model.n_experts. A dense model ignores it.
  GptStage(const GptStageConfig& config, const TpContext& tp = {}, Communicator* ep = nullptr);

  const GptConfig& model_config() const { return config_.model; }
  const GptShard& shard() const { return shard_; }
  bool is_first() const { return config_.first_layer == 0; }
  bool is_last() const { return config_.end_layer == config_.model.n_layer; }

  // layout(): this stage's tensors (names, this rank's shard shapes, offsets in params()).

  // The tied embedding: wte's offset in params()/grads(), -1 when the stage has none (neither
  // first nor last). A last stage that is not also the first holds the tied copy: count it out
  // of a global gradient norm, where wte must appear once.
  int64_t wte_offset() const { return has_wte_ ? w_.wte : -1; }
  int64_t wte_numel() const;
  bool holds_tied_copy() const { return has_wte_ && !is_first(); }

  // Ranges [begin, end) of params()/grads(), in order, that cover them together: this ep rank's
  // experts of every MoE block of the stage (average over dp only), and the rest (average over
  // dp x ep). Without MoE blocks, expert_ranges() is empty and dense_ranges() is everything.
  const std::vector<ParamGroup>& expert_ranges() const { return expert_ranges_; }
  const std::vector<ParamGroup>& dense_ranges() const { return dense_ranges_; }

  // Routing statistics of this stage's MoE blocks, as Gpt's (model.h), counted at backward:
  // since the last take (the step's), and since construction. Under expert parallelism they
  // describe the ep group's union (the same on its ranks). Across pipeline stages combine them
  // with MoeTotals::merge_stage.
  MoeTotals take_moe_totals();
  MoeTotals moe_run_totals() const;
  // The MoE part of what the last forward returned (0 for a dense stage): evaluation subtracts
  // it to report the task loss alone, as for Gpt::aux_loss().
  float aux_loss() const { return aux_share_; }
  // Sets of MoE layers created so far: the most micro-batches this stage had between forward and
  // backward (0 for a dense model). Each holds one layer per MoE block (max_tokens = B T).
  int moe_layer_sets() const { return moe_ ? moe_->sets() : 0; }

  // The step's global batch of m micro-batches, each B * seq_len tokens: tokens (m B T) read by
  // the first stage, targets (m B T; < 0 ignored) by the last (either may be null on a stage
  // that does not read it). Micro-batch mb is [mb B T, (mb + 1) B T). The last stage counts the
  // valid targets of all m micro-batches, so the summed loss is the mean over the global batch,
  // as Gpt::forward computes it on the whole batch. Not copied: must outlive the step.
  void set_batch(const int32_t* tokens, const int32_t* targets, int micro_batches);

  // The grad-ready hook (FlatParams::set_grad_ready_hook) is called during the step's last
  // backward (micro-batch m - 1) with each range of grads() that no later computation of the
  // step changes: a block once its weight gradients are done (in B, or in W with a split
  // backward), the embeddings and the head at the end of B. Together the calls cover grads()
  // once per step, so data parallelism can average a range while earlier blocks, and the rest
  // of the pipeline, still compute.

  // forward returns mb's contribution to the step's loss: its cross-entropy share on the last
  // stage, plus this stage's MoE terms / micro-batches on any stage with MoE blocks.
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
  // Split backward: where block j's W operands sit in a saved buffer (see the header comment).
  void place_weight_grads();
  BlockWeightGrads weight_grads_at(float* saved, int j) const;
  BlockWeightInputs weight_inputs_at(const float* saved, int j) const;
  // The grad-ready reports: block j's range; every range outside the blocks.
  void report_block(int j);
  void report_outside_blocks();

  GptStageConfig config_;
  TpContext tp_;
  Communicator* ep_ = nullptr;  // MoE experts sharded over it; null: all here
  GptShard shard_;
  int64_t rows_ = 0, C_ = 0;
  bool has_wte_ = false;

  GptParams w_;  // offsets into params_; blocks[j] is block first_layer + j

  int64_t encoded_at_ = -1;  // saved: the embedding output (rows,C), first stage only
  int64_t blocks_at_ = 0;    // saved: block j's activations at blocks_at_ + j * block_floats_
  int64_t block_floats_ = 0;
  int64_t residual3_in_block_ = 0;  // the block output's offset inside a block's part
  struct WeightGradParts {          // offsets inside a block's part, split backward only
    int64_t attn_in = 0, atty = 0, mlp_in = 0, fch_gelu = 0;
    int64_t dqkv = 0, dattn_proj = 0, dfc = 0, dfc_proj = 0;
  };
  WeightGradParts wg_;
  int64_t head_at_ = -1;  // saved: the head's activations, last stage only
  int64_t saved_floats_ = 0;

  BlockActivations work_;  // the block being computed
  HeadActivations head_;
  GptScratch scratch_;
  std::vector<float> dres_;  // (rows,C): gradient of the residual stream

  const int32_t* tokens_ = nullptr;
  const int32_t* targets_ = nullptr;
  float inv_valid_ = 0.0f;                          // 1 / valid targets of the global batch
  int micro_batches_ = 1;                           // of the step (set_batch)
  float aux_share_ = 0.0f;                          // the MoE part of the last forward's return
  int backward_inputs_ = 0, backward_weights_ = 0;  // of the step so far (set_batch resets)

  std::vector<ParamGroup> expert_ranges_, dense_ranges_;
  std::unique_ptr<StageMoeLayers> moe_;  // null for a dense model
};

}  // namespace brigade
