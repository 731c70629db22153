#pragma once
// GPT-2 (Radford et al. 2019) with explicit forward and backward, as in llm.c's
// train_gpt2.c: token + position embedding, n_layer pre-LayerNorm blocks
//   x = x + c_proj(attn(c_attn(ln_1(x))));  x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))
// a final ln_f, the unembedding tied to wte (logits = x @ wte^T) and a fused softmax
// cross-entropy. Every activation and activation-gradient buffer is allocated once in the
// constructor for (max_batch, seq_len); forward and backward never allocate.
//
// Optionally tensor-parallel (Megatron): given a TpContext over tp ranks, this object holds
// rank tp.rank()'s shard of the model (gpt_layout.h says which tensors are cut how) and runs
// its part of every layer, communicating over tp.comm (parallel/tensor/tp_comm.h). All tp
// ranks of a group must call forward and backward together, on the same batch.
//
// With config.n_experts > 0, every moe_every-th block has a mixture-of-experts MLP (one MoeLayer
// per such block, holding all experts; not combined with tensor parallelism yet). The loss is
// then the cross-entropy plus each MoE block's aux_loss_coef * aux (aux_loss() says how much).
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/model/gpt_block.h"
#include "brigade/model/gpt_config.h"
#include "brigade/model/gpt_head.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/model.h"
#include "brigade/model/moe/moe_layer.h"
#include "brigade/model/tp/tp_context.h"

namespace brigade {

class Gpt : public Model {
 public:
  // Builds the parameter layout (GPT-2 names, forward order; this rank's shards under tensor
  // parallelism), allocates params, grads and every activation buffer for (max_batch,
  // seq_len). Parameters are zero until initialize(), which gives every tp rank the slice of
  // the tp = 1 initialisation (see build_gpt_layout). Throws ConfigError for a bad config or
  // a tp degree that does not divide n_head, 4 * d_model or (sequence parallel) seq_len.
  Gpt(const GptConfig& config, int64_t max_batch, const TpContext& tp = {});
  ~Gpt() override;

  const GptConfig& config() const { return config_; }
  const GptShard& shard() const { return shard_; }
  // Offsets of every tensor in params() (this rank's shards).
  const GptParams& offsets() const { return w_; }
  const TpContext& tp() const { return tp_; }
  // The tp = 1 layout of the same model (layout() itself at tp = 1): what checkpoints store and
  // what parallel/tensor/tp_layout.h gathers into and slices from.
  const ParamLayout& full_layout() const { return tp_.active() ? full_layout_ : layout_; }
  int64_t max_batch() const override { return max_batch_; }

  // batch.tokens and batch.targets hold batch.size * T entries, T = batch.seq_len (at most
  // the model's seq_len; 0 means seq_len). Returns the mean cross-entropy over targets >= 0 (0 when
  // there are none), plus the MoE blocks' load-balancing terms (aux_loss()). An empty batch.targets
  // skips the loss: only the logits are computed. Under sequence parallelism batch.size * T must be
  // a multiple of tp.
  float forward(const Batch& batch) override;

  // Backward of the last forward (same batch; one backward per forward). Accumulates into grads()
  // and reports each range as final: ln_f first, then blocks L-1 .. 0 (each as its MLP half
  // [ln_2 .. mlp.c_proj], then its attention half [ln_1 .. attn.c_proj]), and wte + wpe last (wte
  // is tied to the head, so its gradient is complete only after the embedding backward).
  // Parameter groups (for a ParamGatherer): 0 = wte + wpe, 1 + l = block l, L + 1 = ln_f. Forward
  // acquires each in order and releases it after use, except that the head (ln_f and the tied
  // wte) stays acquired for backward; backward re-acquires the blocks from L-1 down and releases
  // everything before the embedding backward, which reads no parameters.
  // Under tensor parallelism every reported gradient is final for this rank's shard: replicated
  // tensors hold the same gradient on every tp rank.
  void backward(const Batch& batch, float loss_scale) override;

  // Runs forward without a loss and returns logits(). For sampling: pad a shorter prompt
  // to seq_len with any token; causal attention keeps position t independent of later ones.
  const float* forward_logits(const Batch& batch);

  // Logits (batch.size, seq_len, Vl) of the last forward: the whole vocabulary (Vl = vocab) at
  // tp = 1, else this rank's columns [shard().vocab_begin, + Vl) of the padded vocabulary
  // (columns >= vocab are padding and meaningless). backward() overwrites them with their
  // gradient (the cross-entropy backward works in place), so read them before.
  const float* logits() const { return head_.logits.data(); }

  // 6 * N * T + 12 * L * C * T^2 per sequence: N counts every parameter that enters a
  // matmul or elementwise op per token, i.e. all parameters except wpe (wte is counted
  // once, as the tied head matmul); 12 L C T^2 is the attention score and value matmuls,
  // forward + backward, without discount for the causal mask (PaLM, appendix B). Always the
  // whole (tp = 1) model: a tp group shares these flops.
  // MoE blocks count top_k expert MLPs per token and the router matmul.
  double flops_per_example() const override;

  double aux_loss() const override { return aux_loss_; }
  MoeTotals take_moe_totals() override;
  MoeTotals moe_run_totals() const override { return moe_run_; }
  // Block l's MoE layer (null for a dense block); its stats() describe the last forward.
  const MoeLayer* moe_layer(int64_t l) const { return moe_[static_cast<size_t>(l)].get(); }

 private:
  // Parameter groups (Model::param_groups()): embeddings, blocks 0..L-1, ln_f.
  static constexpr int kEmbGroup = 0;
  static int block_group(int64_t l) { return static_cast<int>(l) + 1; }
  int lnf_group() const { return static_cast<int>(config_.n_layer) + 1; }

  void check_batch(const Batch& batch, bool need_targets) const;
  int64_t seq_len_of(const Batch& batch) const;
  GptPass make_pass(const Batch& batch) const;
  void run_forward(const Batch& batch);
  // The residual stream entering block l (the embedding output for l = 0).
  const float* block_input(int64_t l) const {
    if (l == 0) return encoded_.data();
    return config_.recompute_blocks ? block_out_[static_cast<size_t>(l - 1)].data()
                                    : acts_[static_cast<size_t>(l - 1)].residual3.data();
  }
  // Block l's activations: its own, or under recomputation the one set every block reuses.
  BlockActivations& acts(int64_t l) {
    return acts_[config_.recompute_blocks ? 0 : static_cast<size_t>(l)];
  }

  GptConfig config_;
  int64_t max_batch_;
  TpContext tp_;
  GptShard shard_;
  GptParams w_;
  ParamLayout full_layout_;  // only under tensor parallelism

  std::vector<float> encoded_;                 // (rows,C): block 0's input
  std::vector<BlockActivations> acts_;         // per block; one set under recomputation
  std::vector<std::vector<float>> block_out_;  // recomputation: each block's output (rows,C)
  HeadActivations head_;
  int64_t valid_targets_ = 0;    // targets >= 0 in the last forward
  bool backward_ready_ = false;  // a forward with targets ran since the last backward

  GptScratch scratch_;            // shared by every block and the head
  std::vector<float> dresidual_;  // (rows,C): gradient of the residual stream

  std::vector<std::unique_ptr<MoeLayer>> moe_;  // (L): null for dense blocks
  double aux_loss_ = 0.0;                       // MoE terms in the last forward's loss
  MoeTotals moe_step_, moe_run_;                // over backward passes
};

}  // namespace brigade
