// GPT-2 forward and backward over the CPU kernels. The residual stream of block l is
// residual3_[l-1] (encoded_ for l = 0); a block saves its LayerNorm outputs and statistics,
// qkv, the attention output and log-sum-exp, the MLP pre-activation and GELU output, and its
// two residual sums. Backward walks the blocks in reverse with one gradient buffer for the
// residual stream (dresidual_) that every branch accumulates into, plus three scratch
// buffers reused by every block, so activation-gradient memory does not grow with n_layer.
#include "brigade/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/attention.h"
#include "brigade/kernels/cpu/crossentropy.h"
#include "brigade/kernels/cpu/encoder.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/layernorm.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/residual.h"
#include "brigade/monitor/op_profiler.h"

namespace brigade {

namespace {

void require_positive(const char* key, int64_t value) {
  if (value <= 0)
    throw ConfigError(std::string("model.") + key + " = " + std::to_string(value) +
                      ": must be > 0");
}

// Zeroes an activation-gradient buffer before a kernel that accumulates into it.
void zero(OpProfiler* profiler, std::vector<float>& v, int64_t n) {
  ScopedOp scope(profiler, Op::kZeroFill);
  std::fill(v.begin(), v.begin() + n, 0.0f);
}

}  // namespace

void GptConfig::validate() const {
  require_positive("vocab", vocab);
  require_positive("seq_len", seq_len);
  require_positive("d_model", d_model);
  require_positive("n_layer", n_layer);
  require_positive("n_head", n_head);
  if (d_model % n_head != 0)
    throw ConfigError("model.n_head = " + std::to_string(n_head) +
                      ": must divide model.d_model = " + std::to_string(d_model));
}

Gpt::Gpt(const GptConfig& config, int64_t max_batch) : config_(config), max_batch_(max_batch) {
  config_.validate();
  if (max_batch <= 0)
    throw ConfigError("micro-batch size = " + std::to_string(max_batch) + ": must be > 0");
  build_layout();
  allocate_params();

  const int64_t B = max_batch_, T = config_.seq_len, C = config_.d_model;
  const int64_t L = config_.n_layer, NH = config_.n_head, V = config_.vocab;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  encoded_.resize(sz(B * T * C));
  ln1_.resize(sz(L * B * T * C));
  ln1_mean_.resize(sz(L * B * T));
  ln1_rstd_.resize(sz(L * B * T));
  qkv_.resize(sz(L * B * T * 3 * C));
  atty_.resize(sz(L * B * T * C));
  att_lse_.resize(sz(L * B * NH * T));
  residual2_.resize(sz(L * B * T * C));
  ln2_.resize(sz(L * B * T * C));
  ln2_mean_.resize(sz(L * B * T));
  ln2_rstd_.resize(sz(L * B * T));
  fch_.resize(sz(L * B * T * 4 * C));
  fch_gelu_.resize(sz(L * B * T * 4 * C));
  residual3_.resize(sz(L * B * T * C));
  lnf_.resize(sz(B * T * C));
  lnf_mean_.resize(sz(B * T));
  lnf_rstd_.resize(sz(B * T));
  logits_.resize(sz(B * T * V));
  losses_.resize(sz(B * T));
  loss_lse_.resize(sz(B * T));
  scratch_btc_.resize(sz(B * T * C));
  dresidual_.resize(sz(B * T * C));
  dbtc_.resize(sz(B * T * C));
  dbt4c_a_.resize(sz(B * T * 4 * C));
  dbt4c_b_.resize(sz(B * T * 4 * C));
}

void Gpt::build_layout() {
  const int64_t V = config_.vocab, T = config_.seq_len, C = config_.d_model;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  auto weight = [&](const std::string& name, std::vector<int64_t> shape, float std, TpSplit split) {
    return layout_.add({.name = name,
                        .shape = std::move(shape),
                        .init = Init::kNormal,
                        .init_std = std,
                        .weight_decay = true,
                        .tp_split = split});
  };
  auto vec = [&](const std::string& name, int64_t n, Init init, TpSplit split) {
    return layout_.add({.name = name,
                        .shape = {n},
                        .init = init,
                        .init_std = 0.0f,
                        .weight_decay = false,
                        .tp_split = split});
  };
  const auto R = TpSplit::kReplicated, D0 = TpSplit::kDim0, D1 = TpSplit::kDim1;

  wte_ = weight("wte.weight", {V, C}, 0.02f, R);
  wpe_ = weight("wpe.weight", {T, C}, 0.02f, R);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockParams b;
    b.ln1_w = vec(p + "ln_1.weight", C, Init::kOnes, R);
    b.begin = b.ln1_w;
    b.ln1_b = vec(p + "ln_1.bias", C, Init::kZeros, R);
    b.attn_w = weight(p + "attn.c_attn.weight", {3 * C, C}, 0.02f, D0);
    b.attn_b = vec(p + "attn.c_attn.bias", 3 * C, Init::kZeros, D0);
    b.attn_proj_w = weight(p + "attn.c_proj.weight", {C, C}, proj_std, D1);
    b.attn_proj_b = vec(p + "attn.c_proj.bias", C, Init::kZeros, R);
    b.ln2_w = vec(p + "ln_2.weight", C, Init::kOnes, R);
    b.ln2_b = vec(p + "ln_2.bias", C, Init::kZeros, R);
    b.fc_w = weight(p + "mlp.c_fc.weight", {4 * C, C}, 0.02f, D0);
    b.fc_b = vec(p + "mlp.c_fc.bias", 4 * C, Init::kZeros, D0);
    b.fc_proj_w = weight(p + "mlp.c_proj.weight", {C, 4 * C}, proj_std, D1);
    b.fc_proj_b = vec(p + "mlp.c_proj.bias", C, Init::kZeros, R);
    b.end = layout_.total();
    blocks_.push_back(b);
  }
  lnf_w_ = vec("ln_f.weight", C, Init::kOnes, R);
  lnf_b_ = vec("ln_f.bias", C, Init::kZeros, R);

  // Layer groups for sharded parameters (ZeRO-3): embeddings, each block, ln_f.
  param_groups_.push_back({wte_, blocks_.front().begin});
  for (const BlockParams& b : blocks_) param_groups_.push_back({b.begin, b.end});
  param_groups_.push_back({lnf_w_, layout_.total()});
}

int64_t Gpt::seq_len_of(const Batch& batch) const {
  return batch.seq_len > 0 ? batch.seq_len : config_.seq_len;
}

void Gpt::check_batch(const Batch& batch, bool need_targets) const {
  const int64_t n = batch.size * seq_len_of(batch);
  BRIGADE_CHECK(seq_len_of(batch) <= config_.seq_len)
      << "batch.seq_len " << batch.seq_len << " > model seq_len " << config_.seq_len;
  BRIGADE_CHECK(batch.size > 0 && batch.size <= max_batch_)
      << "batch.size " << batch.size << " max_batch " << max_batch_;
  BRIGADE_CHECK(static_cast<int64_t>(batch.tokens.size()) >= n)
      << "tokens " << batch.tokens.size() << " < " << n;
  // An out-of-range id would index past wte or the logits row; the data loader validates
  // its files, this guards memory safety.
  for (int64_t i = 0; i < n; ++i)
    BRIGADE_CHECK(batch.tokens[i] >= 0 && batch.tokens[i] < config_.vocab)
        << "token " << batch.tokens[i] << " at " << i << " outside vocab " << config_.vocab;
  if (!need_targets && batch.targets.empty()) return;
  // Targets >= vocab are caught by the cross-entropy kernel.
  BRIGADE_CHECK(static_cast<int64_t>(batch.targets.size()) >= n)
      << "targets " << batch.targets.size() << " < " << n;
}

void Gpt::run_forward(const Batch& batch) {
  const int64_t B = batch.size, T = seq_len_of(batch), C = config_.d_model;
  const int64_t NH = config_.n_head, V = config_.vocab, BT = B * T;
  const float* p = params();
  const int L = static_cast<int>(config_.n_layer);

  // With a gatherer (ZeRO-3) each group is fetched before use, the next one prefetched while
  // this one computes, and released after use; the head's groups stay for backward.
  acquire_params(kEmbGroup);
  prefetch_params(block_group(0));
  timed(profiler_, Op::kEncoderForward, encoder_forward, encoded_.data(), batch.tokens.data(),
        p + wte_, p + wpe_, B, T, C);
  release_params(kEmbGroup);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const BlockParams& w = blocks_[l];
    acquire_params(block_group(l));
    if (l + 1 < L) {
      prefetch_params(block_group(l + 1));
    } else {
      prefetch_params(lnf_group());
      prefetch_params(kEmbGroup);  // the unembedding is tied to wte
    }
    const float* residual = l == 0 ? encoded_.data() : layer(residual3_, l - 1, C);
    float* ln1 = layer(ln1_, l, C);
    float* ln1_mean = layer(ln1_mean_, l, 1);
    float* ln1_rstd = layer(ln1_rstd_, l, 1);
    float* qkv = layer(qkv_, l, 3 * C);
    float* atty = layer(atty_, l, C);
    float* lse = layer(att_lse_, l, NH);  // (B,NH,T)
    float* residual2 = layer(residual2_, l, C);
    float* ln2 = layer(ln2_, l, C);
    float* ln2_mean = layer(ln2_mean_, l, 1);
    float* ln2_rstd = layer(ln2_rstd_, l, 1);
    float* fch = layer(fch_, l, 4 * C);
    float* fch_gelu = layer(fch_gelu_, l, 4 * C);
    float* residual3 = layer(residual3_, l, C);

    timed(profiler_, Op::kLayernormForward, layernorm_forward, ln1, ln1_mean, ln1_rstd, residual,
          p + w.ln1_w, p + w.ln1_b, BT, C);
    timed(profiler_, Op::kMatmulForward, matmul_forward, qkv, ln1, p + w.attn_w, p + w.attn_b, BT,
          C, 3 * C);
    timed(profiler_, Op::kAttentionForward, attention_forward, atty, lse, qkv, B, T, C, NH);
    timed(profiler_, Op::kMatmulForward, matmul_forward, scratch_btc_.data(), atty,
          p + w.attn_proj_w, p + w.attn_proj_b, BT, C, C);
    timed(profiler_, Op::kResidualForward, residual_forward, residual2, residual,
          scratch_btc_.data(), BT * C);
    timed(profiler_, Op::kLayernormForward, layernorm_forward, ln2, ln2_mean, ln2_rstd, residual2,
          p + w.ln2_w, p + w.ln2_b, BT, C);
    timed(profiler_, Op::kMatmulForward, matmul_forward, fch, ln2, p + w.fc_w, p + w.fc_b, BT, C,
          4 * C);
    timed(profiler_, Op::kGeluForward, gelu_forward, fch_gelu, fch, BT * 4 * C);
    timed(profiler_, Op::kMatmulForward, matmul_forward, scratch_btc_.data(), fch_gelu,
          p + w.fc_proj_w, p + w.fc_proj_b, BT, 4 * C, C);
    timed(profiler_, Op::kResidualForward, residual_forward, residual3, residual2,
          scratch_btc_.data(), BT * C);
    release_params(block_group(l));
  }
  acquire_params(lnf_group());
  acquire_params(kEmbGroup);
  const float* last = layer(residual3_, config_.n_layer - 1, C);
  timed(profiler_, Op::kLayernormForward, layernorm_forward, lnf_.data(), lnf_mean_.data(),
        lnf_rstd_.data(), last, p + lnf_w_, p + lnf_b_, BT, C);
  timed(profiler_, Op::kMatmulForward, matmul_forward, logits_.data(), lnf_.data(), p + wte_,
        nullptr, BT, C, V);
}

float Gpt::forward(const Batch& batch) {
  check_batch(batch, /*need_targets=*/false);
  run_forward(batch);
  valid_targets_ = 0;
  backward_ready_ = false;
  if (batch.targets.empty()) return 0.0f;
  const int64_t BT = batch.size * seq_len_of(batch);
  timed(profiler_, Op::kCrossentropyForward, crossentropy_forward, losses_.data(), loss_lse_.data(),
        logits_.data(), batch.targets.data(), BT, config_.vocab);
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < BT; ++i) {
    if (batch.targets[i] < 0) continue;
    sum += losses_[i];
    ++count;
  }
  valid_targets_ = count;
  backward_ready_ = true;
  return count ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
}

const float* Gpt::forward_logits(const Batch& batch) {
  check_batch(batch, /*need_targets=*/false);
  run_forward(batch);
  valid_targets_ = 0;
  backward_ready_ = false;
  return logits_.data();
}

void Gpt::backward(const Batch& batch, float loss_scale) {
  BRIGADE_CHECK(backward_ready_) << "backward needs a forward with targets before it";
  backward_ready_ = false;  // the head's backward overwrites the logits in place
  check_batch(batch, /*need_targets=*/true);
  const int64_t B = batch.size, T = seq_len_of(batch), C = config_.d_model;
  const int64_t NH = config_.n_head, V = config_.vocab, BT = B * T;
  const float* p = params();
  float* g = grads();
  // d(mean loss)/d(loss of one position) = 1 / count; no valid target means no gradient.
  const float dloss = valid_targets_ > 0 ? loss_scale / static_cast<float>(valid_targets_) : 0.0f;
  const int L = static_cast<int>(config_.n_layer);

  // Head: dlogits in place, then the tied unembedding and ln_f. Their groups are normally still
  // resident from forward; the last block is prefetched meanwhile.
  acquire_params(lnf_group());
  acquire_params(kEmbGroup);
  prefetch_params(block_group(L - 1));
  timed(profiler_, Op::kCrossentropyBackward, crossentropy_backward, logits_.data(), logits_.data(),
        loss_lse_.data(), batch.targets.data(), dloss, BT, V);
  zero(profiler_, dbtc_, BT * C);
  timed(profiler_, Op::kMatmulBackward, matmul_backward, dbtc_.data(), g + wte_, nullptr,
        logits_.data(), lnf_.data(), p + wte_, BT, C, V);
  zero(profiler_, dresidual_, BT * C);
  timed(profiler_, Op::kLayernormBackward, layernorm_backward, dresidual_.data(), g + lnf_w_,
        g + lnf_b_, dbtc_.data(), layer(residual3_, config_.n_layer - 1, C), p + lnf_w_,
        lnf_mean_.data(), lnf_rstd_.data(), BT, C);
  release_params(lnf_group());
  release_params(kEmbGroup);  // the embedding backward reads no parameters
  grad_ready(lnf_w_, layout_.total() - lnf_w_);

  float* dres = dresidual_.data();
  for (int64_t l = config_.n_layer - 1; l >= 0; --l) {
    const BlockParams& w = blocks_[l];
    acquire_params(block_group(l));
    if (l > 0) prefetch_params(block_group(l - 1));
    const float* residual = l == 0 ? encoded_.data() : layer(residual3_, l - 1, C);
    const float* lse = layer(att_lse_, l, NH);
    float* dfch_gelu = dbt4c_a_.data();
    float* dfch = dbt4c_b_.data();
    float* dqkv = dbt4c_a_.data();  // free again once the MLP backward is done
    float* dbtc = dbtc_.data();

    // MLP branch: residual3 = residual2 + c_proj(gelu(c_fc(ln_2(residual2)))).
    zero(profiler_, dbt4c_a_, BT * 4 * C);
    timed(profiler_, Op::kMatmulBackward, matmul_backward, dfch_gelu, g + w.fc_proj_w,
          g + w.fc_proj_b, dres, layer(fch_gelu_, l, 4 * C), p + w.fc_proj_w, BT, 4 * C, C);
    zero(profiler_, dbt4c_b_, BT * 4 * C);
    timed(profiler_, Op::kGeluBackward, gelu_backward, dfch, layer(fch_, l, 4 * C), dfch_gelu,
          BT * 4 * C);
    zero(profiler_, dbtc_, BT * C);
    timed(profiler_, Op::kMatmulBackward, matmul_backward, dbtc, g + w.fc_w, g + w.fc_b, dfch,
          layer(ln2_, l, C), p + w.fc_w, BT, C, 4 * C);
    timed(profiler_, Op::kLayernormBackward, layernorm_backward, dres, g + w.ln2_w, g + w.ln2_b,
          dbtc, layer(residual2_, l, C), p + w.ln2_w, layer(ln2_mean_, l, 1),
          layer(ln2_rstd_, l, 1), BT, C);
    // The MLP half of the block [ln_2, mlp.c_proj] is final: data parallelism can start on it
    // while the attention half computes.
    grad_ready(w.ln2_w, w.end - w.ln2_w);

    // Attention branch: residual2 = residual + c_proj(attn(c_attn(ln_1(residual)))).
    zero(profiler_, dbtc_, BT * C);
    timed(profiler_, Op::kMatmulBackward, matmul_backward, dbtc, g + w.attn_proj_w,
          g + w.attn_proj_b, dres, layer(atty_, l, C), p + w.attn_proj_w, BT, C, C);
    zero(profiler_, dbt4c_a_, BT * 3 * C);
    timed(profiler_, Op::kAttentionBackward, attention_backward, dqkv, dbtc, layer(qkv_, l, 3 * C),
          layer(atty_, l, C), lse, B, T, C, NH);
    zero(profiler_, dbtc_, BT * C);
    timed(profiler_, Op::kMatmulBackward, matmul_backward, dbtc, g + w.attn_w, g + w.attn_b, dqkv,
          layer(ln1_, l, C), p + w.attn_w, BT, C, 3 * C);
    timed(profiler_, Op::kLayernormBackward, layernorm_backward, dres, g + w.ln1_w, g + w.ln1_b,
          dbtc, residual, p + w.ln1_w, layer(ln1_mean_, l, 1), layer(ln1_rstd_, l, 1), BT, C);
    release_params(block_group(l));
    grad_ready(w.begin, w.ln2_w - w.begin);
  }

  timed(profiler_, Op::kEncoderBackward, encoder_backward, g + wte_, g + wpe_, dres,
        batch.tokens.data(), B, T, C);
  grad_ready(wte_, blocks_.front().begin - wte_);
}

double Gpt::flops_per_example() const {
  const double T = static_cast<double>(config_.seq_len);
  const double C = static_cast<double>(config_.d_model);
  const double L = static_cast<double>(config_.n_layer);
  const double n = static_cast<double>(layout_.total() - config_.seq_len * config_.d_model);
  return 6.0 * n * T + 12.0 * L * C * T * T;
}

}  // namespace brigade
