#pragma once
// The mixture-of-experts keys of a step record and of the run summary, written alike by both
// engines (dp_engine.cc: the whole model on rank 0; model_parallel_engine.cc: the pipeline's
// stages together).
#include <nlohmann/json.hpp>

#include "brigade/model/moe/moe_totals.h"

namespace brigade {

// A step's micro-batches: the aux part of `loss`, the share of assignments over capacity, and
// the mean over MoE layer forwards of max expert load / mean load (1 = balanced).
inline void add_moe_step_metrics(nlohmann::json& rec, const MoeTotals& moe) {
  rec["moe_aux_loss"] = moe.mean_aux_term();
  rec["moe_dropped_pct"] = moe.dropped_pct();
  rec["moe_load_imbalance"] = moe.mean_imbalance();
}

// This invocation's steps.
inline void add_moe_summary(nlohmann::json& summary, const MoeTotals& moe) {
  summary["moe_dropped_pct"] = moe.dropped_pct();
  summary["moe_load_imbalance"] = moe.mean_imbalance();
  summary["moe_load_imbalance_max"] = moe.imbalance_max;
}

}  // namespace brigade
