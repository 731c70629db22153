// GPT-2 forward and backward: the embedding, the blocks and the head (gpt_head.h, gpt_block.h)
// in order, with the parameter-group calls (ZeRO-3 gathers) and the grad-ready reports around
// them. The residual stream of block l is acts_[l-1].residual3 (encoded_ for l = 0); under
// recomputation (GptConfig::recompute_blocks) it is block_out_[l-1], acts_ holds one set that
// every block's forward fills, and backward re-runs block l's forward just before its backward.
// Backward walks the blocks in reverse with one gradient buffer for the residual stream
// (dresidual_) that every branch accumulates into, plus scratch buffers reused by every block,
// so activation-gradient memory does not grow with n_layer.
#include "brigade/model/gpt.h"

#include <algorithm>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/trace.h"

namespace brigade {

Gpt::Gpt(const GptConfig& config, int64_t max_batch, const TpContext& tp)
    : config_(config), max_batch_(max_batch), tp_(tp) {
  config_.validate();
  if (max_batch <= 0)
    throw ConfigError("micro-batch size = " + std::to_string(max_batch) + ": must be > 0");
  validate_tensor_parallel(config_, tp_.size(), tp_.sp());
  shard_ = make_gpt_shard(config_, tp_.size(), tp_.rank());
  w_ = build_gpt_layout(config_, shard_, layout_, param_groups_);
  if (tp_.active()) {
    std::vector<ParamGroup> unused;
    build_gpt_layout(config_, make_gpt_shard(config_, 1, 0), full_layout_, unused);
  }
  allocate_params();

  const int64_t BT = max_batch_ * config_.seq_len, C = config_.d_model;
  const int64_t rows = tp_.sp() ? BT / tp_.size() : BT;
  encoded_.resize(static_cast<size_t>(rows * C));
  moe_.resize(static_cast<size_t>(config_.n_layer));
  bool any_dense = false;
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const GptBlockParams& w = w_.blocks[static_cast<size_t>(l)];
    any_dense = any_dense || !w.is_moe;
    if (!config_.recompute_blocks) {
      acts_.emplace_back().allocate(config_, shard_, max_batch_, rows, !w.is_moe);
    } else {
      block_out_.emplace_back(static_cast<size_t>(rows * C));
    }
    if (w.is_moe)
      moe_[static_cast<size_t>(l)] = std::make_unique<MoeLayer>(config_.moe_config(), w.moe, BT);
  }
  if (config_.recompute_blocks) {
    acts_.emplace_back().allocate(config_, shard_, max_batch_, rows, any_dense);
  }
  head_.allocate(config_, shard_, max_batch_, rows);
  scratch_.allocate(BT, tp_.sp() ? rows : 0, C, shard_.fc_local,
                    config_.lora_rank);  // rows: SP only
  dresidual_.resize(static_cast<size_t>(rows * C));
}

Gpt::~Gpt() = default;

MoeTotals Gpt::take_moe_totals() {
  MoeTotals t = moe_step_;
  moe_step_ = {};
  return t;
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
  BRIGADE_CHECK(!tp_.sp() || n % tp_.size() == 0)
      << "sequence parallel: " << n << " token rows not divisible by tp " << tp_.size();
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

GptPass Gpt::make_pass(const Batch& batch) const {
  GptPass pass{.config = &config_, .shard = &shard_, .tp = &tp_, .profiler = profiler_};
  pass.B = batch.size;
  pass.T = seq_len_of(batch);
  pass.BT = pass.B * pass.T;
  pass.rows = tp_.sp() ? pass.BT / tp_.size() : pass.BT;
  pass.row0 = tp_.sp() ? tp_.rank() * pass.rows : 0;
  pass.C = config_.d_model;
  return pass;
}

void Gpt::run_forward(const Batch& batch) {
  const GptPass pass = make_pass(batch);
  const float* p = params();
  const int L = static_cast<int>(config_.n_layer);

  // With a gatherer (ZeRO-3) each group is fetched before use, the next one prefetched while
  // this one computes, and released after use; the head's groups stay for backward.
  aux_loss_ = 0.0;
  acquire_params(kEmbGroup);
  prefetch_params(block_group(0));
  embedding_forward(pass, w_, p, batch.tokens.data(), encoded_.data(), scratch_);
  release_params(kEmbGroup);
  for (int64_t l = 0; l < L; ++l) {
    acquire_params(block_group(l));
    if (l + 1 < L) {
      prefetch_params(block_group(l + 1));
    } else {
      prefetch_params(lnf_group());
      prefetch_params(kEmbGroup);  // the unembedding is tied to wte
    }
    const TraceSpan span =
        TraceSpan::lazy("model", [l] { return "h." + std::to_string(l) + " forward"; });
    aux_loss_ +=
        block_forward(pass, w_.blocks[l], p, block_input(l), acts(l), scratch_, moe_[l].get());
    if (config_.recompute_blocks) {
      const std::vector<float>& out = acts(l).residual3;
      std::copy(out.begin(), out.begin() + pass.rows * pass.C, block_out_[l].begin());
    }
    release_params(block_group(l));
  }
  acquire_params(lnf_group());
  acquire_params(kEmbGroup);
  head_forward(pass, w_, p, block_input(L), head_, scratch_);
}

float Gpt::forward(const Batch& batch) {
  check_batch(batch, /*need_targets=*/false);
  run_forward(batch);
  valid_targets_ = 0;
  backward_ready_ = false;
  if (batch.targets.empty()) return 0.0f;
  const GptPass pass = make_pass(batch);
  loss_forward(pass, head_, batch.targets.data());
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < pass.BT; ++i) {
    if (batch.targets[i] < 0) continue;
    sum += head_.losses[i];
    ++count;
  }
  valid_targets_ = count;
  backward_ready_ = true;
  const double ce = count ? sum / static_cast<double>(count) : 0.0;
  // Dense: exactly the mean cross-entropy as before (no aux term is added).
  return static_cast<float>(config_.moe() ? ce + aux_loss_ : ce);
}

const float* Gpt::forward_logits(const Batch& batch) {
  check_batch(batch, /*need_targets=*/false);
  run_forward(batch);
  valid_targets_ = 0;
  backward_ready_ = false;
  return head_.logits.data();
}

void Gpt::backward(const Batch& batch, float loss_scale) {
  BRIGADE_CHECK(backward_ready_) << "backward needs a forward with targets before it";
  backward_ready_ = false;
  check_batch(batch, /*need_targets=*/true);
  const GptPass pass = make_pass(batch);
  const float* p = params();
  float* g = grads();
  // d(mean loss)/d(loss of one position) = 1 / count; no valid target means no gradient.
  const float dloss = valid_targets_ > 0 ? loss_scale / static_cast<float>(valid_targets_) : 0.0f;
  const int L = static_cast<int>(config_.n_layer);
  float* dres = dresidual_.data();

  // Head: dlogits in place, then the tied unembedding and ln_f. Their groups are normally still
  // resident from forward; the last block is prefetched meanwhile.
  acquire_params(lnf_group());
  acquire_params(kEmbGroup);
  prefetch_params(block_group(L - 1));
  head_backward(pass, w_, p, g, block_input(L), batch.targets.data(), dloss, head_, dres, scratch_);
  release_params(lnf_group());
  release_params(kEmbGroup);  // the embedding backward reads no parameters
  grad_ready(w_.lnf_w, layout_.total() - w_.lnf_w);

  for (int64_t l = L - 1; l >= 0; --l) {
    const GptBlockParams& w = w_.blocks[l];
    const TraceSpan span =
        TraceSpan::lazy("model", [l] { return "h." + std::to_string(l) + " backward"; });
    acquire_params(block_group(l));
    if (l > 0) prefetch_params(block_group(l - 1));
    if (config_.recompute_blocks) {
      // The same forward on the same input: bitwise the activations forward had (the MoE
      // layer routes the same tokens again; its loss term was counted in forward).
      const TraceSpan recompute =
          TraceSpan::lazy("model", [l] { return "h." + std::to_string(l) + " recompute"; });
      block_forward(pass, w, p, block_input(l), acts(l), scratch_, moe_[l].get());
    }
    block_backward_mlp(pass, w, p, g, acts(l), dres, scratch_, moe_[l].get(), loss_scale);
    // The MLP half of the block [ln_2, mlp.c_proj] is final: data parallelism can start on it
    // while the attention half computes.
    grad_ready(w.ln2_w, w.end - w.ln2_w);
    block_backward_attention(pass, w, p, g, acts(l), block_input(l), dres, scratch_);
    release_params(block_group(l));
    grad_ready(w.begin, w.ln2_w - w.begin);
  }

  embedding_backward(pass, w_, g, batch.tokens.data(), dres, scratch_);
  grad_ready(w_.wte, w_.blocks.front().begin - w_.wte);

  if (config_.moe()) {
    // Counted at backward, so evaluation forwards stay out of the training statistics.
    MoeTotals t;
    t.micro_batches = 1;
    t.aux_term = aux_loss_;
    for (const auto& m : moe_)
      if (m) t.add_layer(m->stats());
    moe_step_.merge(t);
    moe_run_.merge(t);
  }
}

double Gpt::flops_per_example() const {
  const double V = static_cast<double>(config_.vocab);
  const double T = static_cast<double>(config_.seq_len);
  const double C = static_cast<double>(config_.d_model);
  const double L = static_cast<double>(config_.n_layer);
  // The tp = 1 parameter count without wpe: wte, L blocks of 12 C^2 + 13 C, ln_f.
  double n = V * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
  // A MoE block runs top_k expert MLPs (8 C^2 + 5 C parameters each) per token instead of one,
  // plus the (E, C) router.
  const double K = static_cast<double>(config_.moe_top_k),
               E = static_cast<double>(config_.n_experts);
  for (int64_t l = 0; l < config_.n_layer; ++l)
    if (config_.moe_block(l)) n += (K - 1.0) * (8.0 * C * C + 5.0 * C) + E * C;
  return 6.0 * n * T + 12.0 * L * C * T * T;
}

}  // namespace brigade
