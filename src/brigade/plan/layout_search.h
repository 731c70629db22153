#pragma once
// `brigade plan`'s search (docs/planning.md): every layout of a config on a cluster's world —
// tp (within a node) x pp x ep x dp, ZeRO stage, micro-batch and accumulation at the same global
// batch, pipeline schedule (and interleaving), recomputation, and DDP or DiLoCo — checked as a
// job would be (Config::validate, plan_job), predicted (cost_model.h), and ranked: the layouts
// that fit the memory of a process, fastest first, each with the reason it lost to the best.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "brigade/plan/cost_model.h"

namespace brigade {

struct SearchOptions {
  // Examples per optimizer step; 0: the config's own (micro_batch x grad_accum x its replicas on
  // the cluster's world, or x 1 where its layout does not fit that world).
  int64_t global_batch = 0;
  std::vector<int64_t> diloco_inner_steps;  // also DiLoCo at each H (slow links); [] = DDP only
  bool as_is = false;                       // only the config's own layout
};

struct Candidate {
  Config config;  // a ready config: the layout's keys set, validated
  JobPlan plan;
  Prediction prediction;
  bool fits = false;    // predicted memory within the process's share of the node
  std::string why_not;  // "" for the best; else why it lost (does not fit; which part is slower)

  // "pp=2 dp=2 ep=1 tp=2 zero=1 1f1b B=4 m=8 recompute=none ddp"
  std::string label() const;
};

struct SearchResult {
  int64_t global_batch = 0;
  std::vector<Candidate> ranked;  // those that fit, fastest first; then the rest, smallest first
  int64_t refused = 0;            // layouts the job checks refuse
  std::map<std::string, int64_t> refusals;  // their reasons (the first line), counted
};

// ConfigError when the config's model is not a GPT, when nothing can be enumerated (a global
// batch the replicas cannot share), or — for as_is — when the config's layout is refused.
SearchResult search_layouts(const Config& base, const ClusterSpec& cluster,
                            const SearchOptions& options);

}  // namespace brigade
