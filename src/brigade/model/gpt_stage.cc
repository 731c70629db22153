// GPT pipeline stage: the whole model's pieces (embedding, blocks, head) over a sub-range of the
// layout, with each micro-batch's activations copied to and from the executor's saved buffer.
// A saved buffer is laid out as
//   [encoded (rows,C)]            first stage only: block 0's input
//   block j, j = 0..nb-1          every BlockActivations vector in a fixed order, the block
//                                 output (residual3) last, so it is the next block's input;
//                                 under recomputation (GptConfig::recompute_blocks) only the
//                                 output, and backward re-runs the block's forward
//   [ln_f mean, rstd, ln_f output, logits, lse]   last stage only
#include "brigade/model/gpt_stage.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/model/moe/ep_moe_layer.h"

namespace brigade {

namespace {

// BlockActivations' vectors in saved-buffer order; residual3 last (see block_input).
std::array<std::vector<float>*, 13> block_fields(BlockActivations& a) {
  return {&a.ln1_mean, &a.ln1_rstd, &a.attn_in, &a.qkv, &a.atty,     &a.lse,      &a.residual2,
          &a.ln2_mean, &a.ln2_rstd, &a.mlp_in,  &a.fch, &a.fch_gelu, &a.residual3};
}

// What head_backward reads of HeadActivations (losses and the vocab-parallel reductions are
// forward-only).
std::array<std::vector<float>*, 5> head_fields(HeadActivations& h) {
  return {&h.lnf_mean, &h.lnf_rstd, &h.lnf, &h.logits, &h.lse};
}

using Fields = std::span<std::vector<float>* const>;

int64_t total_floats(Fields fields) {
  int64_t n = 0;
  for (const std::vector<float>* v : fields) n += static_cast<int64_t>(v->size());
  return n;
}

void copy_out(Fields fields, float* dst) {
  for (const std::vector<float>* v : fields) dst = std::copy(v->begin(), v->end(), dst);
}

// Restores the first `count` fields (a block's output is not read by its backward).
void copy_in(Fields fields, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    std::vector<float>& v = *fields[i];
    std::copy(src, src + v.size(), v.begin());
    src += v.size();
  }
}

}  // namespace

std::vector<int64_t> gpt_layer_params(const GptConfig& c) {
  const int64_t C = c.d_model;
  std::vector<int64_t> out(static_cast<size_t>(c.n_layer), 12 * C * C + 13 * C);
  if (out.empty()) return out;
  out.front() += c.vocab * C + c.seq_len * C;
  out.back() += 2 * C + c.vocab * C;
  return out;
}

GptStage::GptStage(const GptStageConfig& config, const TpContext& tp, Communicator* ep)
    : config_(config), tp_(tp), ep_(ep) {
  const GptConfig& m = config_.model;
  m.validate();
  const int ep_size = ep_ ? ep_->size() : 1, ep_rank = ep_ ? ep_->rank() : 0;
  if (m.moe()) validate_expert_parallel(m.moe_config(), ep_size);
  // This rank's experts of every MoE block (all of them without expert parallelism).
  const int64_t e0 = m.n_experts / ep_size * ep_rank, e1 = m.n_experts / ep_size * (ep_rank + 1);
  if (config_.first_layer < 0 || config_.first_layer >= config_.end_layer ||
      config_.end_layer > m.n_layer)
    throw ConfigError("GPT stage: blocks [" + std::to_string(config_.first_layer) + ", " +
                      std::to_string(config_.end_layer) + ") are not a non-empty range of the " +
                      std::to_string(m.n_layer) + " layers");
  if (config_.micro_batch < 1)
    throw ConfigError("GPT stage: micro_batch = " + std::to_string(config_.micro_batch) +
                      ": must be >= 1");
  validate_tensor_parallel(m, tp_.size(), tp_.sp());
  shard_ = make_gpt_shard(m, tp_.size(), tp_.rank());

  // The whole model's layout on this tp rank; the stage keeps its tensors, in the same order
  // (wte moved behind ln_f on a last stage that is not first: the head comes last), and of each
  // MoE block's experts only this ep rank's.
  ParamLayout full;
  std::vector<ParamGroup> unused;
  const GptParams fw = build_gpt_layout(m, shard_, full, unused);
  std::vector<ParamGroup> others;  // in `full`: the experts of other ep ranks
  for (int l = config_.first_layer; l < config_.end_layer; ++l) {
    const GptBlockParams& b = fw.blocks[static_cast<size_t>(l)];
    if (!b.is_moe) continue;
    const auto expert_at = [&](int64_t e) {
      return e < m.n_experts ? b.moe.experts[static_cast<size_t>(e)].fc_w : b.moe.end;
    };
    others.push_back({b.moe.experts_begin, expert_at(e0)});
    others.push_back({expert_at(e1), b.moe.end});
  }
  auto take = [&](int64_t full_offset, int64_t full_end) {
    for (const ParamSpec& s : full.specs()) {
      const bool other = std::any_of(others.begin(), others.end(), [&](const ParamGroup& g) {
        return s.offset >= g.begin && s.offset < g.end;
      });
      if (s.offset >= full_offset && s.offset < full_end && !other) layout_.add(s);
    }
  };
  const GptBlockParams& first = fw.blocks[static_cast<size_t>(config_.first_layer)];
  const GptBlockParams& last = fw.blocks[static_cast<size_t>(config_.end_layer - 1)];
  if (is_first()) take(fw.wte, first.begin);  // wte, wpe
  take(first.begin, last.end);
  for (int l = config_.first_layer; l < config_.end_layer; ++l) {
    w_.blocks.push_back(block_params_by_name(layout_, m, l, e0, e1));
    const MoeParams& b = w_.blocks.back().moe;
    if (w_.blocks.back().is_moe) expert_ranges_.push_back({b.experts_begin, b.end});
  }
  if (is_last()) {
    take(fw.lnf_w, full.total());
    if (!is_first()) take(fw.wte, fw.wpe);
  }
  has_wte_ = is_first() || is_last();
  w_.wte = has_wte_ ? layout_.at("wte.weight").offset : -1;
  w_.wpe = is_first() ? layout_.at("wpe.weight").offset : -1;
  w_.lnf_w = is_last() ? layout_.at("ln_f.weight").offset : -1;
  w_.lnf_b = is_last() ? layout_.at("ln_f.bias").offset : -1;
  allocate_params();
  int64_t covered = 0;  // dense ranges: what the expert ranges leave
  for (const ParamGroup& r : expert_ranges_) {
    if (r.begin > covered) dense_ranges_.push_back({covered, r.begin});
    covered = r.end;
  }
  if (layout_.total() > covered) dense_ranges_.push_back({covered, layout_.total()});

  const int64_t B = config_.micro_batch, T = m.seq_len, BT = B * T;
  C_ = m.d_model;
  rows_ = tp_.sp() ? BT / tp_.size() : BT;
  if (m.moe()) {
    std::vector<const MoeParams*> moe_blocks;
    for (const GptBlockParams& b : w_.blocks) moe_blocks.push_back(b.is_moe ? &b.moe : nullptr);
    // Under expert parallelism gradients are averaged over replicas: see expert_ranges().
    moe_ = std::make_unique<StageMoeLayers>(m.moe_config(), moe_blocks, ep_, BT,
                                            1.0f / static_cast<float>(ep_size));
  }

  work_.allocate(m, shard_, B, rows_);
  scratch_.allocate(BT, tp_.sp() ? rows_ : 0, C_, shard_.fc_local, m.lora_rank);
  dres_.resize(static_cast<size_t>(rows_ * C_));
  if (m.recompute_blocks) {
    // Only each block's output is kept (the next block's input); backward re-runs the forward.
    // The split backward's W reads activations kept from B to W, which recomputation drops.
    if (config_.split_backward) {
      throw ConfigError(
          "train.recompute = \"block\" with a zero-bubble schedule (split backward): W needs "
          "the activations that recomputation does not keep; use 1f1b or interleaved");
    }
    block_floats_ = rows_ * C_;
    residual3_in_block_ = 0;
  } else {
    block_floats_ = total_floats(block_fields(work_));
    residual3_in_block_ = block_floats_ - static_cast<int64_t>(work_.residual3.size());
  }
  if (config_.split_backward) place_weight_grads();  // may grow block_floats_
  if (is_first()) {
    encoded_at_ = saved_floats_;
    saved_floats_ += rows_ * C_;
  }
  blocks_at_ = saved_floats_;
  saved_floats_ += block_floats_ * static_cast<int64_t>(w_.blocks.size());
  if (is_last()) {
    head_.allocate(m, shard_, B, rows_);
    head_at_ = saved_floats_;
    saved_floats_ += total_floats(head_fields(head_));
  }
}

int64_t GptStage::wte_numel() const {
  return has_wte_ ? layout_.at("wte.weight").numel : 0;
}

void GptStage::set_batch(const int32_t* tokens, const int32_t* targets, int micro_batches) {
  const int64_t n = micro_batches * config_.micro_batch * config_.model.seq_len;
  tokens_ = tokens;
  targets_ = targets;
  micro_batches_ = micro_batches;
  backward_inputs_ = backward_weights_ = 0;
  if (moe_) moe_->set_micro_batches(micro_batches);
  if (is_first()) {
    BRIGADE_CHECK(tokens != nullptr) << "the first GPT stage needs tokens";
    // An out-of-range id would index past wte; the loader validates its files, this guards
    // memory safety as Gpt::forward does.
    for (int64_t i = 0; i < n; ++i)
      BRIGADE_CHECK(tokens[i] >= 0 && tokens[i] < config_.model.vocab)
          << "token " << tokens[i] << " at " << i << " outside vocab " << config_.model.vocab;
  }
  if (is_last()) {
    BRIGADE_CHECK(targets != nullptr) << "the last GPT stage needs targets";
    int64_t valid = 0;
    for (int64_t i = 0; i < n; ++i) valid += targets[i] >= 0;
    inv_valid_ = valid > 0 ? 1.0f / static_cast<float>(valid) : 0.0f;
  }
}

GptPass GptStage::pass() const {
  // Built per call, not stored: it points at members, and a stage may be moved.
  GptPass p{.config = &config_.model, .shard = &shard_, .tp = &tp_, .profiler = nullptr};
  p.B = config_.micro_batch;
  p.T = config_.model.seq_len;
  p.BT = p.B * p.T;
  p.rows = rows_;
  p.row0 = tp_.sp() ? tp_.rank() * rows_ : 0;
  p.C = C_;
  return p;
}

const float* GptStage::block_input(int j, const float* input, const float* saved) const {
  if (j > 0) return saved + blocks_at_ + (j - 1) * block_floats_ + residual3_in_block_;
  return is_first() ? saved + encoded_at_ : input;
}

void GptStage::save_block(float* saved, int j) {
  float* dst = saved + blocks_at_ + j * block_floats_;
  if (config_.model.recompute_blocks) {
    std::copy(work_.residual3.begin(), work_.residual3.begin() + rows_ * C_, dst);
    return;
  }
  copy_out(block_fields(work_), dst);
}

void GptStage::restore_block(const float* saved, int j) {
  const auto fields = block_fields(work_);
  copy_in(fields, saved + blocks_at_ + j * block_floats_, fields.size() - 1);
}

void GptStage::place_weight_grads() {
  // Offsets of the fields inside a block's part, in block_fields order.
  const auto at = [&](const std::vector<float>& field) {
    int64_t offset = 0;
    for (const std::vector<float>* v : block_fields(work_)) {
      if (v == &field) return offset;
      offset += static_cast<int64_t>(v->size());
    }
    BRIGADE_CHECK(false) << "not a block field";
    return int64_t{0};
  };
  wg_.attn_in = at(work_.attn_in);
  wg_.atty = at(work_.atty);
  wg_.mlp_in = at(work_.mlp_in);
  wg_.fch_gelu = at(work_.fch_gelu);
  // B reads qkv and fch from the working copy and writes their gradients (same sizes) over the
  // saved ones; see the header for residual2 and residual3.
  wg_.dqkv = at(work_.qkv);
  wg_.dfc = at(work_.fch);
  const int64_t dy = config_.micro_batch * config_.model.seq_len * C_;
  if (rows_ * C_ == dy) {
    wg_.dattn_proj = at(work_.residual2);
    wg_.dfc_proj = residual3_in_block_;
  } else {  // sequence parallel: residual2/3 hold only this rank's rows
    wg_.dattn_proj = block_floats_;
    wg_.dfc_proj = block_floats_ + dy;
    block_floats_ += 2 * dy;
  }
}

BlockWeightGrads GptStage::weight_grads_at(float* saved, int j) const {
  float* b = saved + blocks_at_ + j * block_floats_;
  return {.dqkv = b + wg_.dqkv,
          .dattn_proj = b + wg_.dattn_proj,
          .dfc = b + wg_.dfc,
          .dfc_proj = b + wg_.dfc_proj};
}

BlockWeightInputs GptStage::weight_inputs_at(const float* saved, int j) const {
  const float* b = saved + blocks_at_ + j * block_floats_;
  return {.attn_in = b + wg_.attn_in,
          .atty = b + wg_.atty,
          .mlp_in = b + wg_.mlp_in,
          .fch_gelu = b + wg_.fch_gelu,
          .dqkv = b + wg_.dqkv,
          .dattn_proj = b + wg_.dattn_proj,
          .dfc = b + wg_.dfc,
          .dfc_proj = b + wg_.dfc_proj};
}

float GptStage::forward(int mb, const float* input, float* output, float* saved) {
  const GptPass ps = pass();
  const float* p = params_.data();
  const int nb = static_cast<int>(w_.blocks.size());
  if (is_first()) {
    embedding_forward(ps, w_, p, tokens_ + mb * ps.BT, saved + encoded_at_, scratch_);
  } else {
    BRIGADE_CHECK(input != nullptr) << "GPT stage " << config_.first_layer << " needs its input";
  }
  if (moe_) moe_->acquire(mb);
  double aux = 0.0;  // the MoE blocks' loss terms
  for (int j = 0; j < nb; ++j) {
    aux += block_forward(ps, w_.blocks[static_cast<size_t>(j)], p, block_input(j, input, saved),
                         work_, scratch_, moe_ ? moe_->layer(mb, j) : nullptr);
    save_block(saved, j);
  }
  // The step's loss holds each micro-batch's MoE terms averaged over the micro-batches, as Gpt
  // with gradient accumulation does; 0 for a dense stage.
  const float aux_share = static_cast<float>(aux / micro_batches_);
  aux_share_ = aux_share;
  const float* x = block_input(nb, input, saved);  // the last block's output
  if (!is_last()) {
    // Under recomputation the executor may pass no output.
    if (output != nullptr) std::copy(x, x + rows_ * C_, output);
    return aux_share;
  }
  head_forward(ps, w_, p, x, head_, scratch_);
  const int32_t* t = targets_ + mb * ps.BT;
  loss_forward(ps, head_, t);
  double sum = 0.0;
  for (int64_t i = 0; i < ps.BT; ++i) {
    if (t[i] >= 0) sum += head_.losses[static_cast<size_t>(i)];
  }
  copy_out(head_fields(head_), saved + head_at_);
  return static_cast<float>(sum) * inv_valid_ + aux_share;
}

void GptStage::backward_input(int mb, const float* input, const float* dout, float* dinput,
                              float* saved) {
  const GptPass ps = pass();
  const float* p = params_.data();
  float* g = grads_.data();
  float* dres = dres_.data();
  const int nb = static_cast<int>(w_.blocks.size());
  const bool last_mb = ++backward_inputs_ == micro_batches_;
  if (is_last()) {
    const auto fields = head_fields(head_);
    copy_in(fields, saved + head_at_, fields.size());
    // d(mean loss over the global batch)/d(loss of one position) = 1 / valid targets.
    head_backward(ps, w_, p, g, block_input(nb, input, saved), targets_ + mb * ps.BT, inv_valid_,
                  head_, dres, scratch_);
  } else {
    BRIGADE_CHECK(dout != nullptr) << "GPT stage " << config_.first_layer << " needs dout";
    std::copy(dout, dout + rows_ * C_, dres);
  }
  // d loss / d (a MoE term of mb) = 1 / micro-batches (see forward), times ep: each ep rank's
  // router gradient holds only its own tokens' share of a term computed over the group's union,
  // and gradients are then averaged over the ep ranks (expert_ranges()).
  const float aux_grad =
      static_cast<float>(ep_ ? ep_->size() : 1) / static_cast<float>(micro_batches_);
  for (int j = nb - 1; j >= 0; --j) {
    const GptBlockParams& w = w_.blocks[static_cast<size_t>(j)];
    const float* x = block_input(j, input, saved);
    MoeMlp* moe = moe_ ? moe_->layer(mb, j) : nullptr;
    if (config_.model.recompute_blocks) {
      // The same forward on the same input: bitwise what forward computed (a MoE layer routes
      // the same tokens again; its loss term was counted in forward).
      block_forward(ps, w, p, x, work_, scratch_, moe);
    } else {
      restore_block(saved, j);
    }
    if (config_.split_backward) {
      block_backward_input(ps, w, p, g, work_, x, dres, weight_grads_at(saved, j), scratch_, moe,
                           aux_grad);
    } else {
      block_backward_mlp(ps, w, p, g, work_, dres, scratch_, moe, aux_grad);
      block_backward_attention(ps, w, p, g, work_, x, dres, scratch_);
      if (last_mb) report_block(j);
    }
  }
  if (moe_) moe_->release(mb);  // a MoE block's backward is whole here (backward_weight skips it)
  if (is_first()) {
    embedding_backward(ps, w_, g, tokens_ + mb * ps.BT, dres, scratch_);
  } else if (dinput != nullptr) {
    std::copy(dres, dres + rows_ * C_, dinput);
  }
  if (last_mb) report_outside_blocks();
}

void GptStage::backward_weight(int /*mb*/, const float* /*input*/, const float* saved) {
  if (!config_.split_backward) return;  // backward_input accumulated them already
  const GptPass ps = pass();
  const bool last_mb = ++backward_weights_ == micro_batches_;
  for (int j = static_cast<int>(w_.blocks.size()) - 1; j >= 0; --j) {
    block_backward_weight(ps, w_.blocks[static_cast<size_t>(j)], params_.data(), grads_.data(),
                          weight_inputs_at(saved, j), scratch_);
    // B of this micro-batch (the block's other gradients) ran before W.
    if (last_mb) report_block(j);
  }
}

void GptStage::report_block(int j) {
  const GptBlockParams& b = w_.blocks[static_cast<size_t>(j)];
  grad_ready(b.begin, b.end - b.begin);
}

void GptStage::report_outside_blocks() {
  // Blocks are contiguous and in order; the embeddings sit before them, the head after.
  const int64_t begin = w_.blocks.front().begin, end = w_.blocks.back().end;
  if (begin > 0) grad_ready(0, begin);
  if (end < layout_.total()) grad_ready(end, layout_.total() - end);
}

MoeTotals GptStage::take_moe_totals() {
  return moe_ ? moe_->take_totals() : MoeTotals{};
}

MoeTotals GptStage::moe_run_totals() const {
  return moe_ ? moe_->run_totals() : MoeTotals{};
}

}  // namespace brigade
