// `brigade launch` as an elastic agent: start a group of workers (launcher_group.h), and when a
// worker fails, start the group again (launcher_policy.h decides whether and with how many),
// each time with a fresh rendezvous: a new BRIGADE_RUN_ID ("<id>.r<k>" for restart k), a new
// store folder, a new free port (unless --master fixed one) and a new store token (unless the
// user gave BRIGADE_STORE_TOKEN), so that nothing a failed group left in its store can be read
// by the next one, nor a straggler of it join. The workers find their checkpoint themselves.
#include "brigade/runtime/launcher.h"

#include <cstdio>
#include <filesystem>

#include "brigade/base/error.h"
#include "brigade/runtime/host_port.h"
#include "brigade/runtime/launcher_group.h"
#include "brigade/runtime/launcher_policy.h"
#include "brigade/runtime/worker_command.h"

namespace brigade {

namespace {

// Removes a group's store folder when the group has ended; it outlives every worker.
struct StoreDirGuard {
  std::string dir;
  ~StoreDirGuard() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

// A signal that reached the launcher between two groups, or 0.
int pending_interrupt(SignalScope& signals) {
  int interrupt = 0;
  while (int sig = signals.next()) {
    if (sig != SIGCHLD && interrupt == 0) interrupt = sig;
  }
  return interrupt;
}

}  // namespace

int launch(const LaunchOptions& options) {
  options.validate();
  GroupSpec group{.command = worker_command(options),
                  .base_env = inherited_env(),
                  .options = options,
                  .contract = {}};
  const std::string base_run_id = options.run_id.empty() ? make_run_id() : options.run_id;
  SignalScope signals;
  for (int restarts = 0;; ++restarts) {
    LaunchContract& contract = group.contract;
    contract.master_port = options.master_port != 0 ? options.master_port : pick_free_port();
    contract.run_id = restarts == 0 ? base_run_id : base_run_id + ".r" + std::to_string(restarts);
    // Secure by default: without a token any local process could join rank 0's TCP store.
    contract.store_token = options.store_token.empty() ? make_store_token() : options.store_token;
    const int nproc = group.options.nproc;
    const int first = options.node_rank * nproc;
    std::string attempt = restarts == 0 ? ""
                                        : "restart " + std::to_string(restarts) + " of " +
                                              std::to_string(options.max_restarts) + ": ";
    launcher_say(attempt + std::to_string(nproc) + " worker(s), ranks " + std::to_string(first) +
                 "-" + std::to_string(first + nproc - 1) + " of " +
                 std::to_string(options.nnodes * nproc) + ", master " + options.master_addr + ":" +
                 std::to_string(contract.master_port) + ", run id " + contract.run_id);
    // One node: the workers can rendezvous through a folder, which needs no port.
    StoreDirGuard store_dir;
    contract.store_dir.clear();
    if (options.nnodes == 1) contract.store_dir = store_dir.dir = make_store_dir(contract.run_id);
    std::fflush(stdout);  // nothing buffered may be duplicated into the children by fork()

    GroupOutcome outcome = run_worker_group(group, signals);
    if (outcome.kind == GroupOutcome::Kind::kSucceeded) {
      if (restarts > 0) {
        launcher_say("all " + std::to_string(nproc) + " worker(s) finished after " +
                     std::to_string(restarts) + " restart(s)");
      }
      return kExitOk;
    }
    if (outcome.kind == GroupOutcome::Kind::kInterrupted) return 128 + outcome.signal;
    if (int sig = pending_interrupt(signals)) {
      launcher_say("received " + signal_name(sig) + " while the workers were stopping; no restart");
      return 128 + sig;
    }
    RestartDecision next = decide_restart(options, restarts, nproc, outcome);
    std::string who = outcome.rank >= 0 ? "rank " + std::to_string(outcome.rank) + " " + outcome.how
                                        : "a worker could not be stopped";
    if (!next.restart) {
      launcher_say("giving up after " + std::to_string(restarts) + " restart(s): " + who + "; " +
                   next.reason + "; exit code " + std::to_string(kExitWorkerFailed));
      return kExitWorkerFailed;
    }
    if (next.nproc != nproc) {
      launcher_say("the slot of rank " + std::to_string(outcome.rank) +
                   " is retired: continuing on " + std::to_string(next.nproc) + " worker(s) (was " +
                   std::to_string(nproc) + ", --min-nproc " +
                   std::to_string(options.min_nproc_or_nproc()) + ")");
    }
    launcher_say("restarting the group (" + std::to_string(restarts + 1) + " of " +
                 std::to_string(options.max_restarts) + ") after: " + who);
    group.options.nproc = next.nproc;
  }
}

}  // namespace brigade
