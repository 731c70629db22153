#pragma once
// How `brigade generate` splits a GPT over the processes of its job: parallel.pp pipeline stages
// of consecutive blocks (balanced by parameter count as training balances them, or
// parallel.layer_split), each cut tp ways by tensor parallelism, pp x tp = the job's processes
// (comm/mesh.h: tp fastest, so a stage's tp ranks are adjacent). The checkpoint's own [parallel]
// is the layout it was trained in and does not apply: by default pp = 1 and tp = the processes.
#include <string>
#include <vector>

#include "brigade/model/gpt_config.h"

namespace brigade {

struct GenerationLayout {
  int pp = 1;
  int tp = 1;
  std::vector<int> stage_bounds;  // first block of each stage, then n_layer

  // "pp=2 x tp=1, stages [0, 1, 2]"
  std::string to_string() const;
};

// The keys generate's --set takes.
inline constexpr const char* kGenerationLayoutKeys =
    "parallel.pp, parallel.tp, parallel.layer_split";

// overrides: "KEY=VALUE" (--set) over the keys above only. Throws ConfigError naming the key, its
// value and what is allowed: another key; pp < 1 or more stages than model.n_layer blocks; pp not
// dividing world_size, or pp x tp != world_size; a tp that does not cut the model (n_head,
// 4 * d_model); a layer_split whose entries are not pp positive counts summing to n_layer; pp > 1
// for a mixture-of-experts model (the key-value cache does not run its expert MLPs).
GenerationLayout resolve_generation_layout(const GptConfig& model,
                                           const std::vector<std::string>& overrides,
                                           int world_size);

}  // namespace brigade
