// `brigade launch --nproc N [--nnodes M --node-rank K --master HOST:PORT] [--grace S] [--exec]
//  [--run-id ID] [--max-restarts R [--min-nproc M]] [--heartbeat-timeout S]
//  -- <worker command...>`: see runtime/launcher.h and docs/launching.md.
#include <memory>
#include <string>
#include <vector>

#include "brigade/cli/commands.h"
#include "brigade/runtime/host_port.h"
#include "brigade/runtime/launcher.h"

namespace brigade::cli {

namespace {
struct LaunchArgs {
  LaunchOptions options;
  std::string master;  // HOST[:PORT]
};
}  // namespace

Command add_launch(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  auto* sub = app.add_subcommand(
      "launch",
      "start N worker processes on this node and watch them; the worker command follows --");
  LaunchOptions& o = args->options;
  sub->add_option("--nproc", o.nproc, "workers to start on this node")->required();
  sub->add_option("--nnodes", o.nnodes, "nodes in the job (each runs its own brigade launch)")
      ->capture_default_str();
  sub->add_option("--node-rank", o.node_rank, "index of this node, in [0, nnodes)")
      ->capture_default_str();
  sub->add_option("--master", args->master,
                  "HOST:PORT of the rendezvous, served by rank 0; default 127.0.0.1 and a free "
                  "port (a port is required with --nnodes > 1)");
  sub->add_option("--grace", o.grace_s, "seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  sub->add_flag("--exec", o.exec_raw,
                "the worker command is a program (e.g. numactl, a script), not a brigade "
                "subcommand");
  sub->add_option("--run-id", o.run_id,
                  "BRIGADE_RUN_ID for the workers (give every node the same); default: fresh");
  sub->add_option("--max-restarts", o.max_restarts,
                  "restart all workers after a failure, up to this many times; they resume from "
                  "the latest checkpoint")
      ->capture_default_str();
  sub->add_option("--min-nproc", o.min_nproc,
                  "with --max-restarts: each restart drops the failed worker's slot, down to this "
                  "many workers (default: --nproc, never shrink)");
  sub->add_option("--heartbeat-timeout", o.heartbeat_timeout_s,
                  "seconds without a heartbeat after which a worker is hung (0: off)")
      ->capture_default_str();
  sub->add_option("args", o.args, "worker command: a brigade subcommand with its arguments")
      ->required();
  return [args]() {
    LaunchOptions options = args->options;
    if (!args->master.empty()) {
      HostPort hp = parse_host_port(args->master, "--master");
      options.master_addr = hp.host;
      options.master_port = hp.port;
    }
    // The launch options first (they name the flag), then the worker's config, all before any
    // worker starts.
    options.validate();
    if (!options.exec_raw) validate_worker_config(options.args, options.nproc * options.nnodes);
    return launch(options);
  };
}

}  // namespace brigade::cli
