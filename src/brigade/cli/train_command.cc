#include <memory>
#include <string>
#include <vector>

#include "brigade/base/thread_name.h"
#include "brigade/cli/commands.h"
#include "brigade/runtime/config.h"
#include "brigade/train/eval_job.h"
#include "brigade/train/fed_roles.h"
#include "brigade/train/job_check.h"
#include "brigade/train/job_plan.h"
#include "brigade/train/trainer.h"
#include "brigade/train/training_data.h"

namespace brigade::cli {

namespace {
struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
  int64_t nproc = 0;  // check-config: the world size to check the layout against; 0 = unknown
};

void add_config_args(CLI::App* sub, ConfigArgs& args) {
  sub->add_option("config", args.path, "TOML config file (see configs/)")->required();
  add_set_option(sub, args.overrides);
}
}  // namespace

CLI::Option* add_set_option(CLI::App* sub, std::vector<std::string>& overrides) {
  return sub
      ->add_option("--set", overrides,
                   "override a config value, one per --set (repeat it): section.key=value")
      ->type_name("KEY=VALUE")
      ->default_str("")  // none, rather than the empty list's "[]"
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
}

WorkerConfigFacts validate_worker_config(const std::vector<std::string>& worker_args,
                                         int world_size) {
  if (worker_args.empty()) return {};
  std::vector<std::string> rest(worker_args.rbegin(), worker_args.rend() - 1);  // CLI11: reversed
  if (worker_args[0] == "eval") {
    CLI::App app("worker");
    EvalJob job;
    add_eval_options(&app, job);
    try {
      app.parse(rest);
    } catch (const CLI::ParseError&) {
      return {};  // the worker reports its own command-line errors
    }
    check_eval_job(job, world_size > 0 ? world_size : 1);
    return {};
  }
  if (worker_args[0] == "generate") {
    check_generate_job(rest, world_size > 0 ? world_size : 1);
    return {};
  }
  if (worker_args[0] != "train") return {};
  CLI::App app("worker");
  ConfigArgs args;
  add_config_args(&app, args);
  try {
    app.parse(rest);
  } catch (const CLI::ParseError&) {
    return {};  // the worker reports its own command-line errors
  }
  Config config = load_config(args.path, args.overrides);
  config.validate();
  // The layout against the number of workers about to start, and the data they will read:
  // refused here, before any process trains.
  const JobPlan plan = world_size > 0 ? check_world_size(config, world_size) : JobPlan{};
  check_freeze(config);
  check_data_paths(config);
  resolve_vocab_from_data(config);
  if (config.sync.method == SyncKind::kFed) return {.droppable_from = 1};  // the clients
  if (plan.roles == JobRoles::kParameterServers && config.ps.consistency != "bsp") {
    // Workers 1.. (ranks below the servers) may leave and come back.
    return {.droppable_from = 1, .droppable_until = static_cast<int>(plan.trainers)};
  }
  return {};
}

Command add_train(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto* sub = app.add_subcommand("train", "train a model from a config");
  add_config_args(sub, *args);
  sub->footer(
      "Every config key, its default and the values it allows: docs/configuration.md.\n"
      "brigade check-config CONFIG [--set ...] [--nproc N] checks a config as train does and "
      "prints it resolved, without training.\n"
      "Several processes: brigade launch --nproc N -- train CONFIG [--set ...].");
  return [args]() {
    // Workers are started through /proc/self/exe, which tools would show as "exe".
    name_this_thread("brigade-train");
    Config config = load_config(args->path, args->overrides);
    config.validate();
    check_freeze(config);
    check_data_paths(config);  // before a run folder is made
    resolve_vocab_from_data(config);
    return train(config);
  };
}

// A federation started by hand (docs/federated.md, "Started by hand"): one process per role,
// each reading its own config (the role's own checks follow in fed_roles.cc).
namespace {
Config federation_config(const ConfigArgs& args) {
  Config config = load_config(args.path, args.overrides);
  config.validate();
  resolve_vocab_from_data(config);
  configure_kernels(config.train);
  return config;
}
}  // namespace

Command add_fed_server(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto* sub = app.add_subcommand(
      "fed-server", "run a federated coordinator for clients started with `brigade fed-client`");
  add_config_args(sub, *args);
  return [args]() {
    name_this_thread("brigade-fed-server");
    return serve_federation(federation_config(*args));
  };
}

Command add_fed_client(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto client = std::make_shared<int>(0);
  auto* sub = app.add_subcommand(
      "fed-client", "run federated client K against a coordinator started by `brigade fed-server`");
  add_config_args(sub, *args);
  sub->add_option("--client", *client, "this client's index K (fed.client_data, its keys)")
      ->required()
      ->check(CLI::Range(0, (1 << 20) - 1));
  return [args, client]() {
    name_this_thread("brigade-fed-client");
    return join_federation(federation_config(*args), *client);
  };
}

Command add_check_config(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto* sub = app.add_subcommand("check-config",
                                 "validate a config (and its data paths) and print it resolved");
  add_config_args(sub, *args);
  sub->add_option("--nproc,--nproc-per-node,--nproc_per_node", args->nproc,
                  "check the layout against a job of this many processes")
      ->check(CLI::Range(1, 1 << 20));
  return [args]() {
    Config config = load_config(args->path, args->overrides);
    config.validate();
    if (args->nproc > 0) check_world_size(config, args->nproc);
    check_freeze(config);
    check_data_paths(config);
    resolve_vocab_from_data(config);
    // Without a world size dp is parallel.dp (or 1); `brigade launch` checks the product.
    const JobPlan plan = plan_job(config, args->nproc);
    // Printed only once every check has passed.
    std::fputs(config.to_toml().c_str(), stdout);
    std::fprintf(stdout, "# job: %s\n", plan.to_string().c_str());
    if (plan.model_parallel)
      std::fprintf(stdout, "# hybrid mesh: %s\n", plan.mesh.to_string().c_str());
    return 0;
  };
}

}  // namespace brigade::cli
