#include "brigade/model/moe/stage_moe_layers.h"

#include "brigade/base/check.h"
#include "brigade/model/moe/ep_moe_layer.h"
#include "brigade/model/moe/moe_layer.h"

namespace brigade {

StageMoeLayers::StageMoeLayers(const MoeConfig& config, const std::vector<const MoeParams*>& blocks,
                               Communicator* ep, int64_t max_tokens, float expert_grad_scale)
    : config_(config), ep_(ep), max_tokens_(max_tokens), expert_grad_scale_(expert_grad_scale) {
  for (const MoeParams* b : blocks) {
    blocks_.push_back(b ? std::make_unique<MoeParams>(*b) : nullptr);
    moe_blocks_ += b != nullptr;
  }
}

void StageMoeLayers::set_micro_batches(int micro_batches) {
  BRIGADE_CHECK(micro_batches >= 1) << "micro_batches " << micro_batches;
  // A set held by a micro-batch past the new count (an evaluation forward with no backward)
  // goes back to the free list.
  for (size_t mb = static_cast<size_t>(micro_batches); mb < set_of_mb_.size(); ++mb) {
    if (set_of_mb_[mb] >= 0) free_.push_back(set_of_mb_[mb]);
  }
  set_of_mb_.resize(static_cast<size_t>(micro_batches), -1);
}

StageMoeLayers::Set StageMoeLayers::make_set() const {
  Set set;
  for (const auto& b : blocks_) {
    if (!b) {
      set.push_back(nullptr);
    } else if (ep_) {
      set.push_back(
          std::make_unique<EpMoeLayer>(config_, *b, *ep_, max_tokens_, expert_grad_scale_));
    } else {
      set.push_back(std::make_unique<MoeLayer>(config_, *b, max_tokens_));
    }
  }
  return set;
}

void StageMoeLayers::acquire(int mb) {
  BRIGADE_CHECK(mb >= 0 && static_cast<size_t>(mb) < set_of_mb_.size())
      << "micro-batch " << mb << " of " << set_of_mb_.size() << " (set_batch first)";
  int& s = set_of_mb_[static_cast<size_t>(mb)];
  if (s >= 0) return;
  if (free_.empty()) {
    sets_.push_back(make_set());
    free_.push_back(static_cast<int>(sets_.size()) - 1);
  }
  s = free_.back();
  free_.pop_back();
}

MoeMlp* StageMoeLayers::layer(int mb, int j) {
  BRIGADE_CHECK(mb >= 0 && static_cast<size_t>(mb) < set_of_mb_.size() &&
                set_of_mb_[static_cast<size_t>(mb)] >= 0)
      << "micro-batch " << mb << " holds no MoE layers (no forward since its last backward)";
  return sets_[static_cast<size_t>(set_of_mb_[static_cast<size_t>(mb)])][static_cast<size_t>(j)]
      .get();
}

void StageMoeLayers::release(int mb) {
  int& s = set_of_mb_[static_cast<size_t>(mb)];
  BRIGADE_CHECK(s >= 0) << "micro-batch " << mb << " holds no MoE layers";
  MoeTotals t;
  t.micro_batches = 1;
  for (const auto& layer : sets_[static_cast<size_t>(s)]) {
    if (!layer) continue;
    t.add_layer(layer->stats());
    t.aux_term += config_.aux_loss_coef * layer->stats().aux_loss;
  }
  step_.merge(t);
  run_.merge(t);
  free_.push_back(s);
  s = -1;
}

MoeTotals StageMoeLayers::take_totals() {
  MoeTotals t = step_;
  step_ = {};
  return t;
}

}  // namespace brigade
