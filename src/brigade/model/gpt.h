#pragma once
// GPT-2 (Radford et al. 2019) with explicit forward and backward, as in llm.c's
// train_gpt2.c: token + position embedding, n_layer pre-LayerNorm blocks
//   x = x + c_proj(attn(c_attn(ln_1(x))));  x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))
// a final ln_f, the unembedding tied to wte (logits = x @ wte^T) and a fused softmax
// cross-entropy. Every activation and activation-gradient buffer is allocated once in the
// constructor for (max_batch, seq_len); forward and backward never allocate.
#include <cstdint>
#include <vector>

#include "brigade/model/model.h"

namespace brigade {

struct GptConfig {
  int64_t vocab = 256;    // V
  int64_t seq_len = 256;  // T: the context length, also the size of wpe
  int64_t d_model = 256;  // C
  int64_t n_layer = 4;    // L
  int64_t n_head = 4;     // NH; must divide d_model
  // Throws ConfigError naming the field when a value is out of range.
  void validate() const;
};

class Gpt : public Model {
 public:
  // Builds the parameter layout (GPT-2 names, forward order), allocates params, grads and
  // every activation buffer for (max_batch, seq_len). Parameters are zero until initialize().
  // Initialisation: normal(0, 0.02) for wte, wpe and every matrix except the two c_proj
  // weights, which get 0.02/sqrt(2 n_layer) (GPT-2's residual scaling); biases zero;
  // LayerNorm gains one.
  Gpt(const GptConfig& config, int64_t max_batch);

  const GptConfig& config() const { return config_; }
  int64_t max_batch() const override { return max_batch_; }

  // batch.tokens and batch.targets hold batch.size * T entries, T = batch.seq_len (at most
  // the model's seq_len; 0 means seq_len). Returns the mean cross-entropy over targets >= 0 (0 when
  // there are none). An empty batch.targets skips the loss: only the logits are computed.
  float forward(const Batch& batch) override;

  // Backward of the last forward (same batch; one backward per forward). Accumulates into grads()
  // and reports each range as final: ln_f first, then blocks L-1 .. 0 (each as its MLP half
  // [ln_2 .. mlp.c_proj], then its attention half [ln_1 .. attn.c_proj]), and wte + wpe last (wte
  // is tied to the head, so its gradient is complete only after the embedding backward).
  // Parameter groups (for a ParamGatherer): 0 = wte + wpe, 1 + l = block l, L + 1 = ln_f. Forward
  // acquires each in order and releases it after use, except that the head (ln_f and the tied
  // wte) stays acquired for backward; backward re-acquires the blocks from L-1 down and releases
  // everything before the embedding backward, which reads no parameters.
  void backward(const Batch& batch, float loss_scale) override;

  // Runs forward without a loss and returns logits(). For sampling: pad a shorter prompt
  // to seq_len with any token; causal attention keeps position t independent of later ones.
  const float* forward_logits(const Batch& batch);

  // Logits (batch.size, seq_len, vocab) of the last forward. backward() overwrites them
  // with their gradient (the cross-entropy backward works in place), so read them before.
  const float* logits() const { return logits_.data(); }

  // 6 * N * T + 12 * L * C * T^2 per sequence: N counts every parameter that enters a
  // matmul or elementwise op per token, i.e. all parameters except wpe (wte is counted
  // once, as the tied head matmul); 12 L C T^2 is the attention score and value matmuls,
  // forward + backward, without discount for the causal mask (PaLM, appendix B).
  double flops_per_example() const override;

 private:
  // One block's parameter offsets in the flat buffer.
  struct BlockParams {
    int64_t ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b;
    int64_t ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
    int64_t begin, end;  // [begin, end): the block's whole range
  };
  // Parameter groups (Model::param_groups()): embeddings, blocks 0..L-1, ln_f.
  static constexpr int kEmbGroup = 0;
  static int block_group(int64_t l) { return static_cast<int>(l) + 1; }
  int lnf_group() const { return static_cast<int>(config_.n_layer) + 1; }

  void build_layout();
  void check_batch(const Batch& batch, bool need_targets) const;
  int64_t seq_len_of(const Batch& batch) const;
  void run_forward(const Batch& batch);
  // Per-layer slice of a (L, max_batch, T, width) activation buffer.
  float* layer(std::vector<float>& buf, int64_t l, int64_t width) {
    return buf.data() + l * max_batch_ * config_.seq_len * width;
  }

  GptConfig config_;
  int64_t max_batch_;
  int64_t wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<BlockParams> blocks_;

  // Activations saved for backward. (L, B, T, width) unless noted.
  std::vector<float> encoded_;  // (B,T,C): block 0's input
  std::vector<float> ln1_, ln1_mean_, ln1_rstd_;
  std::vector<float> qkv_;        // (L,B,T,3C)
  std::vector<float> atty_;       // (L,B,T,C): attention output before c_proj
  std::vector<float> att_lse_;    // (L,B,NH,T)
  std::vector<float> residual2_;  // after the attention residual
  std::vector<float> ln2_, ln2_mean_, ln2_rstd_;
  std::vector<float> fch_, fch_gelu_;             // (L,B,T,4C)
  std::vector<float> residual3_;                  // block output
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_;  // (B,T,C), (B,T), (B,T)
  std::vector<float> logits_;                     // (B,T,V); dlogits after backward
  std::vector<float> losses_, loss_lse_;          // (B,T)
  int64_t valid_targets_ = 0;                     // targets >= 0 in the last forward
  bool backward_ready_ = false;     // a forward with targets ran since the last backward
  std::vector<float> scratch_btc_;  // forward: projection output before residual add

  // Activation gradients, reused by every block.
  std::vector<float> dresidual_;          // (B,T,C): gradient of the residual stream
  std::vector<float> dbtc_;               // (B,T,C): dlnf, datty, dln2, dln1 in turn
  std::vector<float> dbt4c_a_, dbt4c_b_;  // (B,T,4C): dfch_gelu / dfch, dqkv
};

}  // namespace brigade
