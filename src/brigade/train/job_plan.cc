#include "brigade/train/job_plan.h"

#include <fmt/format.h>

#include "brigade/base/error.h"

namespace brigade {

namespace {

// sync.method = "ps": the first world - ps.servers ranks train, the rest serve.
int64_t ps_workers(const Config& config, int64_t world) {
  const int64_t workers = world - config.ps.servers;
  if (workers < 1) {
    throw ConfigError(
        fmt::format("ps.servers = {}: the job has {} process(es), so none would be "
                    "left to train; use at most {} servers or start more processes",
                    config.ps.servers, world, world - 1));
  }
  if (config.ps.aggregate > workers) {
    throw ConfigError(fmt::format(
        "ps.aggregate = {}: one update would average more than a global batch (the job has {} "
        "worker(s), each pushing its slice of it); use 1..{}",
        config.ps.aggregate, workers, workers));
  }
  return workers;
}

// sync.method = "fed": rank 0 coordinates, every other rank is a client.
int64_t federation_clients(const Config& config, int64_t world) {
  if (world < 2) {
    throw ConfigError(
        "sync.method = \"fed\": the job has 1 process; a federation needs a coordinator (rank "
        "0) and at least one client (start N + 1 processes for N clients)");
  }
  const int64_t clients = world - 1;
  const FedConfig& fed = config.fed;
  if (fed.clients != 0 && fed.clients != clients) {
    throw ConfigError(fmt::format(
        "fed.clients = {}: the job has {} process(es), a coordinator and {} client(s); leave it "
        "at 0 under `brigade launch` (it is for `brigade fed-server`)",
        fed.clients, world, clients));
  }
  if (fed.attackers >= clients) {
    throw ConfigError(fmt::format(
        "fed.attackers = {}: the job has {} client(s); at least one client must be honest",
        fed.attackers, clients));
  }
  if (fed.secure_aggregation && clients > 255) {
    throw ConfigError(fmt::format(
        "fed.secure_aggregation = true: the job has {} clients; secure aggregation shares keys "
        "among at most 255 (Shamir over GF(2^8))",
        clients));
  }
  if (fed.min_clients > clients) {
    throw ConfigError(fmt::format(
        "fed.min_clients = {}: the job has {} process(es), a coordinator and {} client(s); "
        "start at least {} processes or lower fed.min_clients",
        fed.min_clients, world, clients, fed.min_clients + 1));
  }
  return clients;
}

// The trainers' mesh. Whole models: dp = parallel.dp, which must cover every trainer (0: all).
HybridLayout trainer_mesh(const Config& config, int64_t trainers, bool model_parallel) {
  const ParallelConfig& p = config.parallel;
  if (model_parallel && trainers == 1) {
    throw ConfigError(fmt::format(
        "parallel.tp = {}, parallel.pp = {}, parallel.ep = {} need tp x pp x ep processes; this "
        "is one process (start it with brigade launch --nproc N)",
        p.tp, p.pp, p.ep));
  }
  if (!model_parallel && trainers > 0 && p.dp != 0 && p.dp != trainers) {
    throw ConfigError(fmt::format("parallel.dp = {}: the job has {} {} (dp = 0 uses them all)",
                                  p.dp, trainers,
                                  config.sync.method == SyncKind::kPs ? "workers" : "processes"));
  }
  return resolve_hybrid_layout(config, trainers);
}

}  // namespace

std::string JobPlan::to_string() const {
  const std::string size = world > 0 ? fmt::format("{} processes", world) : "processes not known";
  switch (roles) {
    case JobRoles::kParameterServers:
      return fmt::format("{}, {} worker(s) ({}) and {} parameter server(s)", size, trainers,
                         mesh.shape.to_string(), servers);
    case JobRoles::kFederation:
      return fmt::format("{}, a coordinator and {} client(s)", size, trainers);
    case JobRoles::kReplicas:
      break;
  }
  return fmt::format("{}, {}{}", size, mesh.shape.to_string(),
                     model_parallel ? " (the GPT cut into stages of tp shards)" : "");
}

JobPlan plan_job(const Config& config, int64_t world_size) {
  JobPlan plan;
  plan.world = world_size;
  plan.model_parallel = is_model_parallel(config);
  switch (config.sync.method) {
    case SyncKind::kFed:
      // Clients train whole models of their own; their mesh is theirs alone.
      plan.roles = JobRoles::kFederation;
      plan.trainers = world_size > 0 ? federation_clients(config, world_size) : 0;
      plan.sync_replicas = plan.trainers;
      plan.mesh = resolve_hybrid_layout(config, 0);
      return plan;
    case SyncKind::kPs:
      plan.roles = JobRoles::kParameterServers;
      plan.trainers = world_size > 0 ? ps_workers(config, world_size) : 0;
      plan.servers = config.ps.servers;
      break;
    default:
      plan.trainers = world_size;
      break;
  }
  plan.mesh = trainer_mesh(config, plan.trainers, plan.model_parallel);
  const MeshShape& s = plan.mesh.shape;
  plan.sync_replicas = is_low_communication(config.sync.method) ? s.dp : s.dp * s.ep;
  return plan;
}

}  // namespace brigade
