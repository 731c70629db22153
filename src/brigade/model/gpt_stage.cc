// GPT pipeline stage: the whole model's pieces (embedding, blocks, head) over a sub-range of the
// layout, with each micro-batch's activations copied to and from the executor's saved buffer.
// A saved buffer is laid out as
//   [encoded (rows,C)]            first stage only: block 0's input
//   block j, j = 0..nb-1          every BlockActivations vector in a fixed order, the block
//                                 output (residual3) last, so it is the next block's input
//   [ln_f mean, rstd, ln_f output, logits, lse]   last stage only
#include "brigade/model/gpt_stage.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>

#include "brigade/base/check.h"
#include "brigade/base/error.h"

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

GptStage::GptStage(const GptStageConfig& config, const TpContext& tp) : config_(config), tp_(tp) {
  const GptConfig& m = config_.model;
  m.validate();
  if (m.moe())  // a MoeLayer holds one micro-batch's routing; stages keep several in flight
    throw ConfigError("model.n_experts = " + std::to_string(m.n_experts) +
                      ": mixture-of-experts blocks are not supported in pipeline stages yet");
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
  // (wte moved behind ln_f on a last stage that is not first: the head comes last).
  ParamLayout full;
  std::vector<ParamGroup> unused;
  const GptParams fw = build_gpt_layout(m, shard_, full, unused);
  auto take = [&](int64_t full_offset, int64_t full_end) {
    for (const ParamSpec& s : full.specs()) {
      if (s.offset >= full_offset && s.offset < full_end) layout_.add(s);
    }
  };
  const GptBlockParams& first = fw.blocks[static_cast<size_t>(config_.first_layer)];
  const GptBlockParams& last = fw.blocks[static_cast<size_t>(config_.end_layer - 1)];
  if (is_first()) take(fw.wte, first.begin);  // wte, wpe
  const int64_t blocks_begin = layout_.total();
  take(first.begin, last.end);
  const int64_t shift = blocks_begin - first.begin;
  for (int l = config_.first_layer; l < config_.end_layer; ++l) {
    GptBlockParams b = fw.blocks[static_cast<size_t>(l)];
    for (int64_t* o :
         {&b.ln1_w, &b.ln1_b, &b.attn_w, &b.attn_b, &b.attn_proj_w, &b.attn_proj_b, &b.ln2_w,
          &b.ln2_b, &b.fc_w, &b.fc_b, &b.fc_proj_w, &b.fc_proj_b, &b.begin, &b.end})
      *o += shift;
    w_.blocks.push_back(b);
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
  params_ = FlatBuffer(layout_.total());
  grads_ = FlatBuffer(layout_.total());

  const int64_t B = config_.micro_batch, T = m.seq_len, BT = B * T;
  C_ = m.d_model;
  rows_ = tp_.sp() ? BT / tp_.size() : BT;

  work_.allocate(m, shard_, B, rows_);
  scratch_.allocate(BT, tp_.sp() ? rows_ : 0, C_, shard_.fc_local);
  dres_.resize(static_cast<size_t>(rows_ * C_));
  block_floats_ = total_floats(block_fields(work_));
  residual3_in_block_ = block_floats_ - static_cast<int64_t>(work_.residual3.size());
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

void GptStage::zero_grads() {
  std::fill(grads_.data(), grads_.data() + grads_.size(), 0.0f);
}

void GptStage::set_batch(const int32_t* tokens, const int32_t* targets, int micro_batches) {
  const int64_t n = micro_batches * config_.micro_batch * config_.model.seq_len;
  tokens_ = tokens;
  targets_ = targets;
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
  copy_out(block_fields(work_), saved + blocks_at_ + j * block_floats_);
}

void GptStage::restore_block(const float* saved, int j) {
  const auto fields = block_fields(work_);
  copy_in(fields, saved + blocks_at_ + j * block_floats_, fields.size() - 1);
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
  for (int j = 0; j < nb; ++j) {
    block_forward(ps, w_.blocks[static_cast<size_t>(j)], p, block_input(j, input, saved), work_,
                  scratch_);
    save_block(saved, j);
  }
  const float* x = block_input(nb, input, saved);  // the last block's output
  if (!is_last()) {
    // Under recomputation the executor may pass no output.
    if (output != nullptr) std::copy(x, x + rows_ * C_, output);
    return 0.0f;
  }
  head_forward(ps, w_, p, x, head_, scratch_);
  const int32_t* t = targets_ + mb * ps.BT;
  loss_forward(ps, head_, t);
  double sum = 0.0;
  for (int64_t i = 0; i < ps.BT; ++i) {
    if (t[i] >= 0) sum += head_.losses[static_cast<size_t>(i)];
  }
  copy_out(head_fields(head_), saved + head_at_);
  return static_cast<float>(sum) * inv_valid_;
}

void GptStage::backward_input(int mb, const float* input, const float* dout, float* dinput,
                              float* saved) {
  const GptPass ps = pass();
  const float* p = params_.data();
  float* g = grads_.data();
  float* dres = dres_.data();
  const int nb = static_cast<int>(w_.blocks.size());
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
  for (int j = nb - 1; j >= 0; --j) {
    const GptBlockParams& w = w_.blocks[static_cast<size_t>(j)];
    restore_block(saved, j);
    block_backward_mlp(ps, w, p, g, work_, dres, scratch_);
    block_backward_attention(ps, w, p, g, work_, block_input(j, input, saved), dres, scratch_);
  }
  if (is_first()) {
    embedding_backward(ps, w_, g, tokens_ + mb * ps.BT, dres, scratch_);
  } else if (dinput != nullptr) {
    std::copy(dres, dres + rows_ * C_, dinput);
  }
}

void GptStage::backward_weight(int /*mb*/, const float* /*input*/, const float* /*saved*/) {
  // backward_input accumulated the weight gradients already (see the header).
}

}  // namespace brigade
