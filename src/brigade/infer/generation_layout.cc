#include "brigade/infer/generation_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/parallel/pipeline/layer_partition.h"
#include "brigade/runtime/config.h"

namespace brigade {

std::string GenerationLayout::to_string() const {
  return fmt::format("pp={} x tp={}, stages {}", pp, tp, stage_bounds);
}

GenerationLayout resolve_generation_layout(const GptConfig& model,
                                           const std::vector<std::string>& overrides,
                                           int world_size) {
  bool tp_set = false;
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    const auto trimmed = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t") + 1);
      return s;
    };
    const std::string k = trimmed(key);
    if (k != "parallel.pp" && k != "parallel.tp" && k != "parallel.layer_split") {
      throw ConfigError(
          fmt::format("--set {}: generate takes only {} (the layout over the job's "
                      "processes; the model is the checkpoint's)",
                      o, kGenerationLayoutKeys));
    }
    tp_set = tp_set || k == "parallel.tp";
  }
  // The overrides over the defaults: TOML values and type errors as everywhere else.
  const ParallelConfig p = parse_config("", "generate --set", overrides).parallel;
  const int L = static_cast<int>(model.n_layer);
  GenerationLayout g;
  if (p.pp < 1 || p.pp > L) {
    throw ConfigError(fmt::format(
        "parallel.pp = {}: pipeline stages must be 1 to model.n_layer = {} (each stage holds at "
        "least one block)",
        p.pp, L));
  }
  g.pp = static_cast<int>(p.pp);
  if (world_size % g.pp != 0) {
    std::vector<int> allowed;
    for (int d = 1; d <= std::min(world_size, L); ++d) {
      if (world_size % d == 0) allowed.push_back(d);
    }
    throw ConfigError(fmt::format(
        "parallel.pp = {} does not divide the job's {} process(es): pp x tp must equal the "
        "number of processes; allowed parallel.pp here: {}",
        g.pp, world_size, fmt::join(allowed, ", ")));
  }
  g.tp = world_size / g.pp;
  if (tp_set && p.tp != g.tp) {
    throw ConfigError(fmt::format(
        "parallel.tp = {} with parallel.pp = {}: pp x tp = {} != the job's {} process(es); "
        "allowed parallel.tp here: {} (or leave it out)",
        p.tp, g.pp, p.tp * g.pp, world_size, g.tp));
  }
  if (g.tp > 1) {
    try {
      validate_tensor_parallel(model, g.tp, false);
    } catch (const ConfigError& e) {
      throw ConfigError(
          fmt::format("parallel.tp = {} (the job's {} process(es) / parallel.pp = {}): {}", g.tp,
                      world_size, g.pp, e.what()));
    }
  }
  if (g.pp > 1 && model.moe()) {
    throw ConfigError(fmt::format(
        "parallel.pp = {} with model.n_experts = {}: pipeline generation runs on the key-value "
        "cache, which does not run mixture-of-experts blocks yet; allowed parallel.pp: 1",
        g.pp, model.n_experts));
  }
  std::vector<int> split;
  if (p.layer_split.empty()) {
    split = balance_layers(gpt_layer_params(model), g.pp);
  } else {
    for (int64_t n : p.layer_split) split.push_back(static_cast<int>(n));
    try {
      validate_layer_split(split, g.pp, L);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("parallel.layer_split = [{}] with parallel.pp = {}: {}",
                                    fmt::join(p.layer_split, ", "), g.pp, e.what()));
    }
  }
  g.stage_bounds = stage_boundaries(split);
  return g;
}

}  // namespace brigade
