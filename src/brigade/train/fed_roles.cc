#include "brigade/train/fed_roles.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/path_pattern.h"
#include "brigade/comm/curve_socket.h"
#include "brigade/comm/key_file.h"
#include "brigade/fed/client.h"
#include "brigade/fed/coordinator.h"
#include "brigade/fed/rendezvous.h"
#include "brigade/fed/state_file.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/metrics.h"
#include "brigade/monitor/tensorboard_writer.h"
#include "brigade/runtime/interrupt.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/tensor/rng.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/fed_data.h"
#include "brigade/train/model_factory.h"

namespace brigade {

namespace {

constexpr const char* kDoneKey = "fed/done";

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// A federation started by hand (fed-server, fed-client) has no store to publish a run tag in:
// both ends derive it from what they share, the coordinator's public key and run.name. A
// restarted coordinator keeps it, so its clients go on with it.
uint64_t standalone_run_tag(const std::string& coordinator_public, const std::string& run_name) {
  return hash_name(coordinator_public + "/" + run_name) | 1;
}

// store: the job's rendezvous store, or null for a coordinator started by `brigade fed-server`
// (its clients are exactly fed.client_public's keys, which it admits from the start).
int coordinate(const Config& config, Store* store, int clients) {
  const RunFolder folder = create_run_folder(config, 0);
  Log log(0, folder.log_path());
  const InterruptGuard interrupts;
  make_dirs(folder.root + "/fed");
  const std::string state_path = folder.root + "/fed/coordinator.state";
  const bool resume = config.run.resume == ResumeMode::kAuto;
  int64_t start_round = 0;
  if (resume && std::filesystem::exists(state_path)) {
    start_round = read_state_file(state_path).int_or("next_round", 0);
  }
  MetricsWriter metrics(folder.metrics_path());
  metrics.begin_segment(start_round, {{"role", "coordinator"}, {"clients", clients}});
  // Each round's record as TensorBoard scalars too ("round/test_loss" at the round).
  TensorBoardWriter tensorboard(folder.tensorboard_dir());
  if (start_round > 0) tensorboard.start_session(start_round, state_path);
  metrics.set_observer([&tensorboard](std::string_view type, const nlohmann::json& record) {
    if (type == "round") tensorboard.add_scalars(record.value("round", int64_t{0}), type, record);
  });

  const std::unique_ptr<Dataset> test = load_fed_test_set(config);
  const std::unique_ptr<Model> model = make_model(config.model, fed_eval_batch(config));
  const CurveKeyPair keys =
      config.fed.coordinator_key.empty()
          ? CurveKeyPair::generate()
          : read_secret_key_file(config.fed.coordinator_key, "fed.coordinator_key");
  // fed.client_public: the allow-list is the clients' long-term keys, whatever the store says.
  std::vector<std::string> listed(static_cast<size_t>(clients));
  if (!config.fed.client_public.empty()) {
    for (int k = 0; k < clients; ++k) {
      listed[static_cast<size_t>(k)] =
          read_public_key_file(with_client(config.fed.client_public, k), "fed.client_public");
    }
  }
  auto log_line = [&log](const std::string& line) { log.line(line); };
  // The largest message is an update with a control-variate change: two models.
  CurveServerSocket socket(keys, {}, config.fed.bind.empty() ? config.comm.host : config.fed.bind,
                           model->num_params() * 8 + 4096, "the federated coordinator", "fed.bind",
                           log_line);
  const uint64_t run_tag =
      store ? draw_run_tag() : standalone_run_tag(keys.public_key, config.run.name);
  if (store) {
    publish_coordinator(
        *store, {.endpoint = socket.endpoint(), .public_key = keys.public_key, .run_tag = run_tag});
  }
  std::vector<std::string> known(static_cast<size_t>(clients));
  for (int k = 0; k < clients; ++k) {
    if (!listed[static_cast<size_t>(k)].empty()) socket.allow(listed[static_cast<size_t>(k)], k);
  }
  auto refresh_keys = [&] {
    if (!store) return;
    for (int k = 0; k < clients; ++k) {
      std::string key = client_key_if_published(*store, k);
      if (key.empty() || key == known[static_cast<size_t>(k)]) continue;
      const std::string& want = listed[static_cast<size_t>(k)];
      if (!want.empty() && key != want) {
        log.info("refused client {}: it presents a key that is not its key in fed.client_public",
                 k);
        known[static_cast<size_t>(k)] = std::move(key);  // said once per key
        continue;
      }
      socket.allow(key, k);
      confirm_admission(*store, k, key);
      known[static_cast<size_t>(k)] = std::move(key);
    }
  };
  log.info(
      "federated coordinator at {}: {} clients, {} rounds, strategy {}, server optimizer {}, "
      "model {} ({} parameters), test set {} ({} examples)",
      socket.endpoint(), clients, config.fed.rounds, config.fed.strategy,
      config.fed.server_optimizer, config.model.kind, model->num_params(), fed_test_source(config),
      test->size());
  CoordinatorSetup setup{.fed = config.fed,
                         .clients = clients,
                         .seed = static_cast<uint64_t>(config.run.seed),
                         .run_tag = run_tag,
                         .stop_after = config.run.stop_after,
                         .eval_batches = fed_eval_batches(config),
                         .classifier = config.model.is_classifier(),
                         .state_path = state_path,
                         .resume = resume,
                         .join_timeout = ms(config.comm.timeout_s),
                         .stop_requested = [] { return interrupt_signal() != 0; }};
  // Where the run came from (manifest.json, as training writes it): the coordinator reads only
  // the test set; each client's data is its own party's.
  std::vector<std::string> data_files;
  std::error_code ec;
  if (std::filesystem::is_regular_file(config.fed.test_data, ec)) {
    data_files.push_back(config.fed.test_data);
  }
  nlohmann::json manifest = provenance(config, data_files);
  manifest["federation"] = {{"clients", clients}, {"role", "coordinator"}};
  write_run_manifest(folder, manifest);
  // The global model of every saved round as a checkpoint of the format training writes (its
  // config, the round as its step), so that eval, generate, export and train.init_from take a
  // federation's model like any other. The coordinator's own resume state stays in fed/.
  TrainingCheckpointer checkpointer({.root = folder.checkpoints(),
                                     .keep_last = static_cast<int>(config.train.keep_checkpoints),
                                     .async = false,
                                     .mesh = {{"fed", {{"clients", clients}}}}},
                                    nullptr, CommOptions{}, whole_param_pieces(*model));
  setup.on_saved = [&](int64_t rounds) {
    const SavedState state{.step = rounds,
                           .updates = rounds,
                           .extra = {{"config", config.to_toml()},
                                     {"provenance", manifest},
                                     {"fed", {{"rounds", rounds}, {"clients", clients}}}}};
    for (const SaveResult& r : checkpointer.save(state)) {
      if (r.ok) {
        log.info("checkpoint {} (the global model after round {})", r.dir, rounds);
      } else {
        log.info("checkpoint of round {} failed: {} (the next saved round retries)", rounds,
                 r.error);
      }
    }
  };
  Coordinator coordinator(setup, *model, *test, socket, refresh_keys, metrics, log);
  const CoordinatorOutcome out = coordinator.run();
  if (store) store->set_string(kDoneKey, "1");
  nlohmann::json summary = {{"rounds", out.next_round},
                            {"rounds_this_segment", out.rounds_done},
                            {"test_loss", out.test_loss},
                            {"final", out.next_round == config.fed.rounds}};
  if (config.model.is_classifier()) summary["test_accuracy"] = out.test_accuracy;
  if (config.fed.dp_clip > 0) {
    summary["dp_epsilon"] =
        std::isinf(out.dp_epsilon) ? nlohmann::json(nullptr) : nlohmann::json(out.dp_epsilon);
    summary["dp_delta"] = config.fed.dp_delta;
  }
  metrics.write("summary", summary);
  log.info("federation {}: round {} of {}, {}", out.interrupted ? "interrupted" : "done",
           out.next_round, config.fed.rounds,
           config.model.is_classifier() ? fmt::format("test accuracy {:.2f}% (loss {:.4f})",
                                                      100 * out.test_accuracy, out.test_loss)
                                        : fmt::format("test loss {:.4f}", out.test_loss));
  return out.interrupted ? 128 + interrupt_signal() : 0;
}

// The coordinator a client connects to: through the job's store, or for `brigade fed-client`
// (store null) at fed.coordinator with the key of fed.coordinator_public.
CoordinatorAddress find_coordinator(const Config& config, Store* store, int client,
                                    const std::string& public_key) {
  if (!store) {
    const std::string coordinator_key =
        read_public_key_file(config.fed.coordinator_public, "fed.coordinator_public");
    return {.endpoint = "tcp://" + config.fed.coordinator,
            .public_key = coordinator_key,
            .run_tag = standalone_run_tag(coordinator_key, config.run.name)};
  }
  CoordinatorAddress address = join_coordinator(*store, client, public_key);
  if (!config.fed.coordinator_public.empty() &&
      address.public_key !=
          read_public_key_file(config.fed.coordinator_public, "fed.coordinator_public")) {
    throw CommError(CommError::Kind::kOther,
                    fmt::format("client {}: the coordinator at {} holds a key that is not the "
                                "one in fed.coordinator_public; not connecting",
                                client, address.endpoint));
  }
  return address;
}

int serve_as_client(const Config& config, Store* store, int client, int clients) {
  // Client k is rank k + 1 of the job, or of the federation a fed-client joins.
  const int rank = client + 1;
  const RunFolder folder = create_run_folder(config, rank);
  Log log(rank, folder.rank_log_path(rank), false);
  // The launcher forwards a SIGINT/SIGTERM to every rank: a client answers until the
  // coordinator has saved its round and says stop.
  const InterruptGuard interrupts;
  const std::string data_dir = client_data_folder(config.fed, client);
  const std::unique_ptr<Dataset> data = load_client_data(config, client);
  const std::unique_ptr<Model> model = make_model(config.model, config.train.micro_batch);
  const bool attacker = is_attacker(client, config.fed.attackers);
  if (attacker) log.info("client {} attacks: fed.attack = \"{}\"", client, config.fed.attack);
  const LocalTrainingConfig local{.strategy = config.fed.strategy,
                                  .mu = static_cast<float>(config.fed.mu),
                                  .local_epochs = config.fed.local_epochs,
                                  .local_steps = config.fed.local_steps,
                                  .batch = config.train.micro_batch,
                                  .lr = static_cast<float>(config.train.lr),
                                  .optimizer = optimizer_config(config.train),
                                  .seed = static_cast<uint64_t>(config.run.seed),
                                  .flip_labels = attacker && config.fed.attack == "label_flip"};
  LocalTrainer trainer(local, *model, *data, client);
  const CurveKeyPair keys =
      config.fed.client_key.empty()
          ? CurveKeyPair::generate()
          : read_secret_key_file(with_client(config.fed.client_key, client), "fed.client_key");
  const CoordinatorAddress address = find_coordinator(config, store, client, keys.public_key);
  CurveClientLink link(keys, address.public_key, address.endpoint);
  log.info("federated client {}: {} examples from {}, coordinator at {}", client, data->size(),
           data_dir, address.endpoint);
  make_dirs(folder.root + "/fed");
  const ClientSetup setup{.client = client,
                          .run_tag = address.run_tag,
                          .state_path = fmt::format("{}/fed/client_{}.state", folder.root, client),
                          // A round may take the coordinator's whole deadline, each retry again.
                          .idle_timeout = ms(config.fed.round_deadline_s *
                                                 static_cast<double>(config.fed.round_retries + 2) +
                                             config.comm.timeout_s),
                          .attack = {.kind = attacker ? config.fed.attack : "none",
                                     .scale = config.fed.attack_scale,
                                     .noise = config.fed.attack_noise},
                          .seed = static_cast<uint64_t>(config.run.seed),
                          .federation_clients = clients,
                          .secagg_clip = config.fed.secagg_clip,
                          .dp_clip = config.fed.dp_clip,
                          .classifier = config.model.is_classifier(),
                          .dp_noise = config.fed.dp_noise};
  // A standalone client learns that the run is over from the coordinator's stop alone.
  Client role(
      setup, trainer, *model, link, [store] { return store && store->check({kDoneKey}); }, log);
  const int64_t rounds = role.run();
  log.info("federated client {}: done after {} rounds", client, rounds);
  return 0;
}

}  // namespace

std::string client_data_folder(const FedConfig& fed, int client) {
  return with_client(fed.client_data, client);
}

std::string with_client(const std::string& pattern, int client) {
  return fill_placeholder(pattern, "{client}", client);
}

int train_federated(const Config& config, ProcessGroup group, const JobPlan& plan) {
  const int clients = static_cast<int>(plan.trainers);
  Store* store = group.world_options.store.get();
  if (group.rank() == 0) return coordinate(config, store, clients);
  return serve_as_client(config, store, group.rank() - 1, clients);
}

namespace {

// A key that `brigade <command>` cannot run without; ConfigError naming it when it is empty.
void require_key(const std::string& value, const char* key, const char* command, const char* what) {
  if (value.empty()) {
    throw ConfigError(fmt::format("{} = \"\": `brigade {}` needs it: {}", key, command, what));
  }
}

// What both commands of a federation started by hand need: a federation, and its size.
void check_started_by_hand(const Config& config, const char* command) {
  if (config.sync.method != SyncKind::kFed) {
    throw ConfigError(
        fmt::format("sync.method = \"{}\": `brigade {}` runs a federation; set "
                    "sync.method = \"fed\"",
                    config.sync.method, command));
  }
  if (config.fed.clients < 1) {
    throw ConfigError(fmt::format(
        "fed.clients = {}: `brigade {}` needs the number of clients of the federation (1 or "
        "more; client k holds the key fed.client_public names for k)",
        config.fed.clients, command));
  }
}

}  // namespace

int serve_federation(const Config& config) {
  constexpr const char* kCommand = "fed-server";
  check_started_by_hand(config, kCommand);
  require_key(config.fed.coordinator_key, "fed.coordinator_key", kCommand,
              "the coordinator's long-term key (`brigade keygen`), whose public half the clients "
              "pin");
  require_key(config.fed.client_public, "fed.client_public", kCommand,
              "the clients' public keys, with {client} for the index: the federation's members");
  if (config.fed.bind.find(':') == std::string::npos) {
    throw ConfigError(fmt::format(
        "fed.bind = \"{}\": `brigade fed-server` needs host:port, the address its clients "
        "name in fed.coordinator (for example \"10.0.0.1:29600\")",
        config.fed.bind));
  }
  if (config.fed.min_clients > config.fed.clients) {
    throw ConfigError(fmt::format("fed.min_clients = {}: must be at most fed.clients = {}",
                                  config.fed.min_clients, config.fed.clients));
  }
  return coordinate(config, nullptr, static_cast<int>(config.fed.clients));
}

int join_federation(const Config& config, int client) {
  constexpr const char* kCommand = "fed-client";
  check_started_by_hand(config, kCommand);
  require_key(config.fed.client_key, "fed.client_key", kCommand,
              "the client's long-term key (`brigade keygen`), with {client} for the index, which "
              "the coordinator's fed.client_public lists");
  require_key(config.fed.coordinator_public, "fed.coordinator_public", kCommand,
              "the coordinator's public key, which the client pins");
  require_key(config.fed.coordinator, "fed.coordinator", kCommand,
              "the coordinator's host:port (its fed.bind)");
  if (client < 0 || client >= config.fed.clients) {
    throw ConfigError(fmt::format("--client {}: fed.clients = {} numbers the clients 0..{}", client,
                                  config.fed.clients, config.fed.clients - 1));
  }
  return serve_as_client(config, nullptr, client, static_cast<int>(config.fed.clients));
}

}  // namespace brigade
