#include "brigade/train/ps_roles.h"

#include <fmt/format.h>

#include "brigade/base/error.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/monitor/log.h"
#include "brigade/runtime/interrupt.h"
#include "brigade/sync/ps/ps_rendezvous.h"
#include "brigade/sync/ps/ps_server.h"
#include "brigade/train/engines.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/training_loop.h"

namespace brigade {

namespace {

int serve_parameters(const Config& config, ProcessGroup& group, int workers) {
  const int index = group.rank() - workers;
  Log log(group.rank());
  // The launcher forwards a SIGINT/SIGTERM to every rank: a server keeps serving until the
  // workers have saved their checkpoint and stopped (a second signal ends it at once).
  const InterruptGuard interrupts;
  const std::unique_ptr<Model> model = make_model(config.model, 1, false);
  const auto [begin, end] = ps_server_range(model->num_params(), group.size() - workers, index);
  Store& store = *group.world_options.store;
  uint64_t run_tag = 0;
  const std::map<std::string, int> allow = ps_worker_keys(store, workers, &run_tag);
  const PsServerOptions options{
      .index = index,
      .workers = workers,
      .begin = begin,
      .end = end,
      .consistency = parse_ps_consistency(config.ps.consistency),
      .staleness = config.ps.staleness,
      .staleness_lr = config.ps.staleness_lr,
      .run_tag = run_tag,
      // Workers may legitimately be silent for longer than one collective's wait (loading data,
      // a validation pass, a checkpoint): the server's own bound is ten of them.
      .timeout = std::chrono::milliseconds(static_cast<int64_t>(config.comm.timeout_s * 10000)),
      .worker_timeout =
          std::chrono::milliseconds(static_cast<int64_t>(config.ps.worker_timeout_s * 1000)),
      .dynamic = config.ps.assignment == "dynamic",
      .aggregate = static_cast<int>(config.ps.aggregate),
      .cut_every = config.train.ckpt_every,
      .steps = config.train.steps,
      .stop_after = config.run.stop_after};
  auto log_line = [&log](const std::string& line) { log.line(line); };
  ParameterServer server(options, model->layout(), optimizer_config(config.train), log_line);
  const CurveKeyPair keys = CurveKeyPair::generate();
  const std::string host = config.ps.bind.empty() ? config.comm.host : config.ps.bind;
  // The largest message is init: the range's parameters and optimizer state.
  CurveServerSocket socket(keys, allow, host, server.state_values() * 4 + 4096,
                           "a parameter server", "ps.bind", log_line);
  for (const auto& [key, w] : allow) ps_confirm_admission(store, index, w, key);
  ps_publish_server(store, index, {.endpoint = socket.endpoint(), .public_key = keys.public_key});
  log.info("parameter server {} of {}: elements [{}, {}) of {}, {}, {} workers, at {}", index,
           group.size() - workers, begin, end, model->num_params(), config.ps.consistency, workers,
           socket.endpoint());
  // A restarted worker (ssp, asp) comes back with a new key: admit it.
  std::vector<std::string> known(static_cast<size_t>(workers));
  for (const auto& [key, w] : allow) known[static_cast<size_t>(w)] = key;
  const auto refresh_keys = [&] {
    for (int w = 1; w < workers; ++w) {
      std::string key = ps_worker_key_if_published(store, w);
      if (key.empty() || key == known[static_cast<size_t>(w)]) continue;
      socket.allow(key, w);
      ps_confirm_admission(store, index, w, key);
      known[static_cast<size_t>(w)] = std::move(key);
    }
  };
  server.serve(socket, config.ps.consistency == "bsp" ? std::function<void()>() : refresh_keys);
  const PsStalenessRecord& r = server.staleness();
  std::string counts;
  for (int64_t c : r.counts) counts += (counts.empty() ? "" : " ") + std::to_string(c);
  log.info(
      "parameter server {}: {} updates applied, staleness max {} (counts of 0..15+: {}); {} "
      "messages refused; workers left the bound {} time(s), joined again {} time(s)",
      index, r.applied, r.max, counts, server.refused(), server.workers_left(),
      server.workers_joined());
  return 0;
}

}  // namespace

int train_with_parameter_servers(const Config& config, ProcessGroup group, const JobPlan& plan) {
  const int workers = static_cast<int>(plan.trainers);
  if (group.rank() >= workers) return serve_parameters(config, group, workers);
  // The workers' own group: the loop's collectives (loss, evaluation, checkpoints) must not
  // wait for servers, which run no loop. Under ssp and asp the workers step independently and
  // a worker may die and come back (docs/parameter-servers.md): they have no collective at
  // all, so none waits for a lost one; worker 0 alone evaluates, records and saves.
  ProcessGroup worker_group;
  worker_group.env = group.env;
  worker_group.env.world_size = workers;
  worker_group.world_options = group.world_options;
  worker_group.world_options.size = workers;
  worker_group.world_options.group_name = "workers";
  worker_group.world_options.store_prefix = "workers";
  if (workers > 1 && config.ps.consistency == "bsp")
    worker_group.world = create_communicator(worker_group.world_options);
  worker_group.heartbeat = std::move(group.heartbeat);
  TrainContext ctx(config, worker_group);
  std::unique_ptr<TrainEngine> engine = make_train_engine(ctx, plan);
  return run_training(ctx, *engine);
}

}  // namespace brigade
