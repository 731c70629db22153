#pragma once
// The mixture-of-experts layers of a pipeline stage (model/gpt_stage.h). A MoE layer holds the
// routing and the expert activations of the one forward it ran last, which its backward reads,
// while a stage has several micro-batches between forward and backward. So the stage keeps sets
// of layers (one per MoE block of the stage), one set per micro-batch in flight: acquire(mb)
// gives mb a free set, or leaves it the one it holds (recomputation and evaluation run forward
// again); release(mb) after mb's backward records the set's routing statistics and frees it.
// A set is created only when none is free, i.e. during the first step: a schedule has the same
// micro-batches in flight every step, so later steps do not allocate.
//
// With an ep communicator every layer is an EpMoeLayer over it (this rank's experts, the tokens
// of the ep group's ranks routed together, collective per forward and backward: the ranks of
// one ep group hold the same stage and run the same schedule, so they call in the same order).
// Without one, a MoeLayer with every expert.
#include <cstdint>
#include <memory>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/model/moe/moe_config.h"
#include "brigade/model/moe/moe_mlp.h"
#include "brigade/model/moe/moe_params.h"
#include "brigade/model/moe/moe_totals.h"

namespace brigade {

class StageMoeLayers {
 public:
  // blocks[j]: block j's parameters (offsets into the stage's flat buffer), or null for a dense
  // block. ep: the ep group (outlives this object), or null for every expert in this process.
  // max_tokens: tokens of one micro-batch on this rank (the same on every rank of the group).
  // expert_grad_scale: as for EpMoeLayer (1 / ep when gradients are averaged over replicas).
  StageMoeLayers(const MoeConfig& config, const std::vector<const MoeParams*>& blocks,
                 Communicator* ep, int64_t max_tokens, float expert_grad_scale);

  bool any() const { return moe_blocks_ > 0; }
  int sets() const { return static_cast<int>(sets_.size()); }  // created so far

  // Micro-batches per step are [0, micro_batches): sizes the map from micro-batch to set.
  void set_micro_batches(int micro_batches);

  // Gives mb a set of layers (the one it holds, else a free or a new one).
  void acquire(int mb);
  // Block j's layer in mb's set (acquired), null for a dense block.
  MoeMlp* layer(int mb, int j);
  // After mb's backward: adds the set's statistics (its layers' last forward, which was mb's)
  // to the totals as one micro-batch, and frees the set.
  void release(int mb);

  // Statistics since the last take (the step's), and since construction. aux_term sums the loss
  // terms of this stage's blocks per micro-batch.
  MoeTotals take_totals();
  const MoeTotals& run_totals() const { return run_; }

 private:
  using Set = std::vector<std::unique_ptr<MoeMlp>>;  // per block, null when dense
  Set make_set() const;

  MoeConfig config_;
  std::vector<std::unique_ptr<MoeParams>> blocks_;  // per block, null when dense
  Communicator* ep_;
  int64_t max_tokens_;
  float expert_grad_scale_;
  int moe_blocks_ = 0;

  std::vector<Set> sets_;
  std::vector<int> free_;       // indices of sets held by no micro-batch
  std::vector<int> set_of_mb_;  // (micro_batches): -1 when mb holds none
  MoeTotals step_, run_;
};

}  // namespace brigade
