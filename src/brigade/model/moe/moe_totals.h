#pragma once
// Routing statistics of a model's mixture-of-experts layers summed over training micro-batches,
// for metrics: the percentage of assignments dropped by capacity, the expert load balance
// (max load / mean load per layer forward) and the auxiliary loss term added to the loss.
#include <algorithm>
#include <cstdint>

#include "brigade/model/moe/moe_capacity.h"

namespace brigade {

struct MoeTotals {
  int64_t micro_batches = 0;   // backward passes counted
  int64_t layer_forwards = 0;  // MoE layer forwards counted (micro_batches x MoE blocks)
  int64_t assignments = 0;     // tokens x top_k, summed over layer forwards
  int64_t dropped = 0;         // of those, over capacity
  double aux_term = 0.0;       // sum over micro-batches of the loss term of every MoE block
  double imbalance_sum = 0.0;  // sum over layer forwards of MoeStats::load_imbalance()
  double imbalance_max = 0.0;

  bool empty() const { return layer_forwards == 0; }
  void add_layer(const MoeStats& s) {
    ++layer_forwards;
    assignments += s.assignments;
    dropped += s.dropped;
    const double imb = s.load_imbalance();
    imbalance_sum += imb;
    imbalance_max = std::max(imbalance_max, imb);
  }
  void merge(const MoeTotals& o) {
    micro_batches += o.micro_batches;
    layer_forwards += o.layer_forwards;
    assignments += o.assignments;
    dropped += o.dropped;
    aux_term += o.aux_term;
    imbalance_sum += o.imbalance_sum;
    imbalance_max = std::max(imbalance_max, o.imbalance_max);
  }
  // Adds another pipeline stage's totals over the same micro-batches (its MoE blocks are further
  // layers of the same forwards): everything sums except micro_batches, which stays the count.
  void merge_stage(const MoeTotals& o) {
    const int64_t m = std::max(micro_batches, o.micro_batches);
    merge(o);
    micro_batches = m;
  }
  double dropped_pct() const {
    return assignments ? 100.0 * static_cast<double>(dropped) / static_cast<double>(assignments)
                       : 0.0;
  }
  double mean_imbalance() const {
    return layer_forwards ? imbalance_sum / static_cast<double>(layer_forwards) : 0.0;
  }
  // The aux part of the loss, averaged over micro-batches (what the step's loss contains).
  double mean_aux_term() const {
    return micro_batches ? aux_term / static_cast<double>(micro_batches) : 0.0;
  }
};

}  // namespace brigade
