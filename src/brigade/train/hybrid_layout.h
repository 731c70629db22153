#pragma once
// The hybrid mesh of a run: how [parallel] cuts the world into pp x dp x ep x tp ranks and the
// GPT into pipeline stages, resolved and checked in one place before any process trains.
// `brigade launch` calls it with the number of workers it is about to start, the trainer with
// the world it joined; both refuse an invalid layout with a message printing every factor.
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/comm/mesh.h"
#include "brigade/parallel/pipeline/schedule.h"
#include "brigade/runtime/config.h"

namespace brigade {

struct HybridLayout {
  MeshShape shape;  // pp, dp, ep (1), tp
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int micro_batches = 1;   // m = train.grad_accum
  int virtual_stages = 1;  // v
  bool sequence_parallel = false;
  std::vector<int> stage_bounds;  // first block of each of the pp * v global stages, then n_layer

  // "pp=2 x dp=2 x ep=1 x tp=2, schedule 1f1b, m=4, v=1, stages [0, 2, 4]".
  std::string to_string() const;
};

// Whether the run needs the model-parallel trainer (tp * pp > 1).
bool is_model_parallel(const Config& config);

// Resolves the layout for a job of world_size processes (0: not known yet, e.g. check-config;
// dp is then parallel.dp, or 1). dp = parallel.dp, or world / (pp * tp) when it is 0. Throws
// ConfigError printing every factor when pp x dp x ep x tp != world size, naming the factor when
// the GPT cannot be cut that way (n_head, 4 * d_model, seq_len by tp; more stages than blocks),
// and with the schedule's reason when it cannot run (validate_schedule).
HybridLayout resolve_hybrid_layout(const Config& config, int64_t world_size);

}  // namespace brigade
