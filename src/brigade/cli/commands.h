#pragma once
// The subcommands of the `brigade` binary. Each add_* registers its options on the app and
// returns the function that runs it (called after parsing succeeded); the function returns
// the process exit code and lets brigade::Error propagate to main, which prints it.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace brigade {
struct EvalJob;  // train/eval_job.h
}

namespace brigade::cli {

using Command = std::function<int()>;

Command add_train(CLI::App& app);
Command add_check_config(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_launch(CLI::App& app);
// torchrun's form of a launch, `launch --nproc 2 train cfg.toml --set a.b=c` without `--`: the
// worker command starts at the first argument after `launch` that is neither one of the launch
// subcommand's options nor an option's value, and `--` is put there, so the worker's own options
// (--set) are not taken for the launcher's. args: the command line after the program name; it is
// returned unchanged unless it is a launch without `--`.
std::vector<std::string> separate_worker_command(CLI::App& app, std::vector<std::string> args);
Command add_export(CLI::App& app);
Command add_import(CLI::App& app);
Command add_report(CLI::App& app);
Command add_partition(CLI::App& app);
Command add_privacy(CLI::App& app);
Command add_keygen(CLI::App& app);
Command add_fed_server(CLI::App& app);
Command add_fed_client(CLI::App& app);
Command add_plan(CLI::App& app);

// The `--set KEY=VALUE` option of every command that reads a config: one override per --set,
// repeated for several (a second bare value would be ambiguous with a positional path).
CLI::Option* add_set_option(CLI::App* sub, std::vector<std::string>& overrides);

// The options of `brigade eval` (also parsed by the launcher's check of an eval job).
void add_eval_options(CLI::App* sub, EvalJob& job);

// The launcher's check of a `generate` job (its arguments after "generate", in CLI11's reversed
// order): the checkpoint, the prompts file and the layout over world_size processes; ConfigError
// or IoError for what its workers would refuse. Unparsable arguments are left to the workers.
void check_generate_job(const std::vector<std::string>& args_reversed, int world_size);

// For `brigade launch`: when the worker command is `train <config> [--set ...]`, loads and
// validates that config, so a bad one is refused (ConfigError) before any worker starts; an
// `eval` job's checkpoint, config and layout likewise (train/eval_job.h check_eval_job), and a
// `generate` job's (check_generate_job).
// Other worker commands are left to the workers. world_size > 0: the job's process count, checked
// against the [parallel] mesh (train/hybrid_layout.h). Returns what the launcher needs to know
// of the job.
struct WorkerConfigFacts {
  // Ranks [droppable_from, droppable_until) may fail without stopping the others (0, 0: none;
  // until 0: to the last): federated clients, parameter-server workers 1..N-1 under ssp/asp.
  int droppable_from = 0;
  int droppable_until = 0;
};
WorkerConfigFacts validate_worker_config(const std::vector<std::string>& worker_args,
                                         int world_size = 0);

}  // namespace brigade::cli
