// `brigade launch --nproc N [--nnodes M --node-rank K --master HOST:PORT] [--grace S] [--exec]
//  [--run-id ID] [--max-restarts R [--min-nproc M]] [--heartbeat-timeout S]
//  -- <worker command...>`: see runtime/launcher.h and docs/launching.md. torchrun's spellings
// work as they are (--nproc-per-node, --nproc_per_node, --nnodes MIN:MAX with MIN = MAX,
// --node_rank, --master-addr / --master-port, --rdzv-endpoint, --rdzv-id, --standalone,
// --max_restarts), so a user's torchrun command line runs unchanged.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/cli/commands.h"
#include "brigade/runtime/host_port.h"
#include "brigade/runtime/launcher.h"

namespace brigade::cli {

namespace {
struct LaunchArgs {
  LaunchOptions options;
  std::string master;        // HOST[:PORT] (--master, --rdzv-endpoint)
  std::string nnodes = "1";  // N, or torchrun's MIN:MAX
  std::string master_addr;   // torchrun's --master-addr
  int master_port = 0;       // torchrun's --master-port
  bool standalone = false;   // torchrun's --standalone
};

// --nnodes N or MIN:MAX. brigade's node count is fixed for a job, so MIN:MAX is taken only when
// MIN = MAX; elastic membership is --min-nproc on each node.
int parse_nnodes(const std::string& text) {
  const size_t colon = text.find(':');
  auto number = [&](const std::string& part) {
    size_t used = 0;
    int n = -1;
    try {
      n = std::stoi(part, &used);
    } catch (const std::exception&) {
    }
    if (used != part.size() || part.empty() || n < 1) {
      throw ConfigError(fmt::format("--nnodes {}: expected a node count N >= 1 or MIN:MAX", text));
    }
    return n;
  };
  if (colon == std::string::npos) return number(text);
  const int lo = number(text.substr(0, colon)), hi = number(text.substr(colon + 1));
  if (lo != hi) {
    throw ConfigError(fmt::format(
        "--nnodes {}: a varying number of nodes is not supported; give one count (MIN = MAX), "
        "and --max-restarts with --min-nproc for a job that continues on fewer workers",
        text));
  }
  return lo;
}

// The rendezvous from --master / --rdzv-endpoint or torchrun's --master-addr / --master-port,
// and --standalone, which must not contradict them.
void resolve_master(const LaunchArgs& args, LaunchOptions& options) {
  const bool split = !args.master_addr.empty() || args.master_port != 0;
  if (split && !args.master.empty()) {
    throw ConfigError(
        fmt::format("--master {} and --master-addr/--master-port: give one of them", args.master));
  }
  if (args.standalone && (options.nnodes > 1 || split || !args.master.empty())) {
    throw ConfigError(
        "--standalone: one node with a free local port; it cannot be combined with --nnodes > 1, "
        "--master or --master-addr/--master-port");
  }
  if (!args.master.empty()) {
    HostPort hp = parse_host_port(args.master, "--master");
    options.master_addr = hp.host;
    options.master_port = hp.port;
  }
  if (split) {
    if (args.master_port < 0 || args.master_port > 65535) {
      throw ConfigError(fmt::format("--master-port {}: must be in [1, 65535]", args.master_port));
    }
    if (!args.master_addr.empty()) options.master_addr = args.master_addr;
    options.master_port = args.master_port;
  }
}

}  // namespace

std::vector<std::string> separate_worker_command(CLI::App& app, std::vector<std::string> args) {
  if (args.empty() || args[0] != "launch") return args;
  CLI::App* launch = app.get_subcommand("launch");
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return args;
    if (a.size() > 1 && a[0] == '-') {
      const CLI::Option* option = launch->get_option_no_throw(a.substr(0, a.find('=')));
      // An option's value is the next argument, unless it came with "=" (--nproc=2) or the option
      // is a flag; an unknown option is left for CLI11 to name.
      if (option != nullptr && option->get_items_expected_max() > 0 &&
          a.find('=') == std::string::npos) {
        ++i;
      }
      continue;
    }
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
    return args;
  }
  return args;
}

Command add_launch(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  auto* sub = app.add_subcommand(
      "launch",
      "start N worker processes on this node and watch them; the worker command follows --");
  LaunchOptions& o = args->options;
  sub->add_option("--nproc,--nproc-per-node,--nproc_per_node", o.nproc,
                  "workers to start on this node")
      ->required()
      ->default_str("");  // required: a default would only mislead
  sub->add_option("--nnodes", args->nnodes,
                  "nodes in the job (each runs its own brigade launch); torchrun's MIN:MAX is "
                  "taken when MIN = MAX")
      ->capture_default_str();
  sub->add_option("--node-rank,--node_rank", o.node_rank, "index of this node, in [0, nnodes)")
      ->capture_default_str();
  sub->add_option("--master,--rdzv-endpoint,--rdzv_endpoint", args->master,
                  "HOST:PORT of the rendezvous, served by rank 0; default 127.0.0.1 and a free "
                  "port (a port is required with --nnodes > 1)");
  sub->add_option("--master-addr,--master_addr", args->master_addr,
                  "torchrun's spelling: the rendezvous host (with --master-port)");
  sub->add_option("--master-port,--master_port", args->master_port,
                  "torchrun's spelling: the rendezvous port");
  sub->add_flag("--standalone", args->standalone,
                "one node, a free local port (torchrun's --standalone; the default)");
  sub->add_option("--grace", o.grace_s, "seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  sub->add_flag("--exec", o.exec_raw,
                "the worker command is a program (e.g. numactl, a script), not a brigade "
                "subcommand");
  sub->add_option("--run-id,--rdzv-id,--rdzv_id", o.run_id,
                  "BRIGADE_RUN_ID for the workers (give every node the same); default: fresh");
  sub->add_option("--max-restarts,--max_restarts", o.max_restarts,
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
      ->default_str("")
      ->required();
  return [args]() {
    LaunchOptions options = args->options;
    // `-- brigade train ...` as torchrun users write a program: the worker command is this
    // binary's subcommand, so a leading name of brigade itself is dropped.
    if (!options.exec_raw && options.args.size() > 1 &&
        std::filesystem::path(options.args[0]).filename() == "brigade") {
      options.args.erase(options.args.begin());
    }
    options.nnodes = parse_nnodes(args->nnodes);
    resolve_master(*args, options);
    // The launch options first (they name the flag), then the worker's config, all before any
    // worker starts.
    options.validate();
    if (!options.exec_raw) {
      const WorkerConfigFacts facts =
          validate_worker_config(options.args, options.nproc * options.nnodes);
      options.droppable_from_rank = facts.droppable_from;
      options.droppable_until_rank = facts.droppable_until;
    }
    return launch(options);
  };
}

}  // namespace brigade::cli
