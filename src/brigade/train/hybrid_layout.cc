#include "brigade/train/hybrid_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "brigade/base/error.h"
#include "brigade/model/gpt_layout.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/parallel/pipeline/layer_partition.h"
#include "brigade/train/model_factory.h"

namespace brigade {

bool is_model_parallel(const Config& config) {
  return config.parallel.tp * config.parallel.pp * config.parallel.ep > 1;
}

std::string HybridLayout::to_string() const {
  return fmt::format("{}, schedule {}, m={}, v={}{}, stages {}", shape.to_string(),
                     schedule_kind_name(schedule), micro_batches, virtual_stages,
                     sequence_parallel ? ", sequence parallel" : "", stage_bounds);
}

HybridLayout resolve_hybrid_layout(const Config& config, int64_t world_size) {
  const ParallelConfig& p = config.parallel;
  HybridLayout h;
  h.shape.pp = static_cast<int>(p.pp);
  h.shape.tp = static_cast<int>(p.tp);
  h.shape.ep = static_cast<int>(p.ep);
  const int64_t model_ranks = p.pp * p.ep * p.tp;
  if (p.dp > 0) {
    h.shape.dp = static_cast<int>(p.dp);
  } else if (world_size > 0) {
    h.shape.dp = static_cast<int>(std::max<int64_t>(1, world_size / model_ranks));
  }
  if (world_size > 0 && h.shape.product() != world_size) {
    throw ConfigError(fmt::format(
        "[parallel] layout {} = {} != world size {} (parallel.dp = {}{}): pp x dp x ep x tp must "
        "equal the number of processes",
        h.shape.to_string(), h.shape.product(), world_size, p.dp,
        p.dp == 0 ? fmt::format(", i.e. world / (pp x ep x tp) = {} / {}", world_size, model_ranks)
                  : ""));
  }
  h.schedule = parse_schedule_kind(p.schedule);
  h.micro_batches = static_cast<int>(config.train.grad_accum);
  h.virtual_stages = static_cast<int>(p.virtual_stages);
  h.sequence_parallel = p.sequence_parallel;
  if (!is_model_parallel(config)) {
    h.stage_bounds = {0, static_cast<int>(config.model.n_layer)};
    return h;
  }
  if (config.context() != config.model.seq_len) {
    throw ConfigError(fmt::format(
        "data.seq_len = {}: must be 0 or model.seq_len = {} with parallel.tp = {}, parallel.pp = "
        "{} (pipeline stages are sized for the model's context)",
        config.data.seq_len, config.model.seq_len, p.tp, p.pp));
  }
  const GptConfig gpt = gpt_config(config.model);
  try {
    validate_tensor_parallel(gpt, h.shape.tp, p.sequence_parallel);
    if (p.sequence_parallel && (config.train.micro_batch * gpt.seq_len) % p.tp != 0) {
      throw ConfigError(fmt::format("train.micro_batch x seq_len = {} is not a multiple of tp",
                                    config.train.micro_batch * gpt.seq_len));
    }
    if (h.virtual_stages > 1 && h.shape.pp == 1) {
      throw ConfigError(
          "parallel.virtual_stages > 1 needs parallel.pp > 1 (interleaving "
          "spreads one rank's chunks around a pipeline)");
    }
    const PipelineShape shape{
        .ranks = h.shape.pp, .micro_batches = h.micro_batches, .virtual_stages = h.virtual_stages};
    validate_schedule(h.schedule, shape, gpt.n_layer);
    std::vector<int> split;
    if (p.layer_split.empty()) {
      split = balance_layers(gpt_layer_params(gpt), shape.stages());
    } else {
      for (int64_t n : p.layer_split) split.push_back(static_cast<int>(n));
      validate_layer_split(split, shape.stages(), static_cast<int>(gpt.n_layer));
    }
    h.stage_bounds = stage_boundaries(split);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("[parallel] layout {} (micro-batches m = train.grad_accum = {}, "
                    "virtual_stages = {}): {}",
                    h.shape.to_string(), h.micro_batches, h.virtual_stages, e.what()));
  }
  return h;
}

}  // namespace brigade
