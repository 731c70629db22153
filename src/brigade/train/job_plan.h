#pragma once
// What every process of a job does, resolved once from the config and the number of processes:
// the one place the world is cut into roles and axes. `brigade launch` calls plan_job with the
// workers it is about to start, `brigade check-config --nproc N` with N, and the trainer (and
// `brigade eval`) with the world it joined, so a job the launcher accepts is the job that trains.
// Every refusal is a ConfigError that prints the factors.
//
// Roles by rank:
//   replicas           every rank trains; the world is the mesh pp x dp x ep x tp (1 x world x
//                      1 x 1 without model parallelism)
//   parameter servers  ranks [0, trainers) train as a dp mesh, the last ps.servers serve
//   federation         rank 0 coordinates, ranks 1..trainers are the clients 0..trainers-1
#include <cstdint>
#include <string>

#include "brigade/base/named_enum.h"
#include "brigade/runtime/config.h"
#include "brigade/train/hybrid_layout.h"

namespace brigade {

enum class JobRoles { kReplicas, kParameterServers, kFederation };
template <>
struct EnumNames<JobRoles> {
  static constexpr std::array<std::string_view, 3> kNames = {"replicas", "parameter servers",
                                                             "federation"};
};

struct JobPlan {
  int64_t world = 0;  // processes of the job; 0: not known (check-config without --nproc)
  JobRoles roles = JobRoles::kReplicas;
  int64_t trainers = 0;  // ranks that train: every rank, the ps workers, or the fed clients
  int64_t servers = 0;   // parameter servers, the last ranks (roles = kParameterServers)
  // The trainers' mesh and the GPT's cut into stages (stage_bounds only when model_parallel).
  HybridLayout mesh;
  // pp x ep x tp > 1: the GPT runs as pipeline chunks of tensor-parallel shards.
  bool model_parallel = false;
  // The replicas sync.method counts, whose per-replica state a checkpoint keeps and a quorum
  // chooses among: dp x ep under DDP and ZeRO (each reads its own data), dp for a
  // low-communication method (a replica is its ep, tp and pp groups), the ps workers, the
  // federation's clients.
  int64_t sync_replicas = 1;

  // "4 processes, 3 worker(s) (pp=1 x dp=3 x ep=1 x tp=1) and 1 parameter server(s)"; the
  // mesh's schedule and stages are mesh.to_string()
  std::string to_string() const;
};

// Resolves and checks the roles and the mesh (hybrid_layout.h) for a job of world_size
// processes (0: not known yet; dp is then parallel.dp, or 1).
JobPlan plan_job(const Config& config, int64_t world_size);

}  // namespace brigade
