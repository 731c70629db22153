#pragma once
// `brigade launch`: starts the local workers of a job, one process per rank, and watches them
// (DESIGN.md decision 6). Each worker gets torchrun's environment contract:
//   RANK = node_rank * nproc + local rank    WORLD_SIZE = nnodes * nproc
//   LOCAL_RANK, LOCAL_WORLD_SIZE = nproc     MASTER_ADDR, MASTER_PORT
//   BRIGADE_RUN_ID: the same for all workers of a launch, different for every launch
//   BRIGADE_STORE_DIR (single node only): a fresh empty folder for the rendezvous file store,
//     removed when the launch ends; with nnodes > 1 the launcher's own value is passed on
//   BRIGADE_STORE_TOKEN: the secret a TCP store client must show rank 0's store: the
//     launcher's own BRIGADE_STORE_TOKEN (which every node of a multi-node job must share),
//     else 128 random bits in hex, fresh for every group; never printed
// so the worker finds its place with detect_dist_env() (runtime/dist_env.h) whether it was
// started by this launcher, torchrun, srun or mpirun.
//
// Supervision: worker stdout/stderr are relayed line by line with a "[rank R] " prefix. When a
// worker exits non-zero, dies by a signal or stops sending heartbeats (runtime/heartbeat.h;
// --heartbeat-timeout), the launcher prints one line naming its rank and status, sends SIGTERM
// to the others, SIGKILL after the grace period, and reaps them all. Then, as an elastic agent
// (launcher_policy.h), it starts the group again with a fresh rendezvous, up to --max-restarts
// times, on fewer workers (down to --min-nproc) if asked; when it gives up it returns
// kExitWorkerFailed. SIGINT/SIGTERM/SIGHUP to the launcher are forwarded to the
// workers the same way (a second one sends SIGKILL at once). No process is left behind: each
// worker leads its own process group (killed as a whole when the worker ends), dies with the
// launcher (PR_SET_PDEATHSIG), and the launcher, a child subreaper, kills and reaps any
// descendant that escaped its group before it returns. Every wait is bounded.
#include <string>
#include <vector>

#include "brigade/comm/tcp_store.h"

namespace brigade {

struct LaunchOptions {
  int nproc = 1;                          // workers on this node (--nproc), in [1, 1024]
  int nnodes = 1;                         // nodes in the job (--nnodes)
  int node_rank = 0;                      // this node's index, in [0, nnodes) (--node-rank)
  std::string master_addr = "127.0.0.1";  // rendezvous host (--master HOST:PORT)
  int master_port = 0;                    // 0: pick a free loopback port (single node only)
  double grace_s = 5;                     // SIGTERM -> SIGKILL delay in seconds (--grace)
  bool exec_raw = false;            // run args[0] itself (--exec), not a subcommand of this binary
  std::string run_id;               // BRIGADE_RUN_ID for the workers (--run-id); empty: a fresh one
  std::vector<std::string> args;    // the worker command line
  int max_restarts = 0;             // restarts of the whole group after a failure (--max-restarts)
  int min_nproc = 0;                // fewest workers a restart may use (--min-nproc); 0: nproc
  double heartbeat_timeout_s = 30;  // a worker silent this long is hung (--heartbeat-timeout);
                                    // 0: heartbeats off
  // > 0: a worker of global rank in [droppable_from_rank, droppable_until_rank) (until 0: no
  // upper end) that fails (exit, signal, missed heartbeats) does not stop the others: a
  // federated client dropping out (train/fed_roles.h), a parameter-server worker under ssp or
  // asp (train/ps_roles.h). It is started again, alone, up to max_restarts times (each such
  // worker has its own count), and then leaves the job; the group succeeds when every other
  // worker exits 0. 0: every failure stops the group.
  int droppable_from_rank = 0;
  int droppable_until_rank = 0;
  // The job's rendezvous token, BRIGADE_STORE_TOKEN of the launcher's environment; empty: a
  // fresh random one for every group (single node only). A secret: never printed.
  std::string store_token = store_token_from_env();

  int min_nproc_or_nproc() const { return min_nproc > 0 ? min_nproc : nproc; }

  // Throws ConfigError naming the command-line option, its value and what is allowed.
  void validate() const;
};

// Runs the workers to the end, restarting them as the options allow. Returns 0 when all workers
// of a group exited 0, kExitWorkerFailed (7) when a worker failed and no restart was left (or
// allowed), 128 + signal number when the launcher was interrupted. Throws ConfigError for
// invalid options (nothing started) and IoError when workers cannot be started (those already
// started are killed first). Assumes the calling process has no other children: it reaps and,
// at the end, kills every child it finds.
int launch(const LaunchOptions& options);

// A fresh run id: UTC time and 32 random bits, "20250101-120000-1a2b3c4d".
std::string make_run_id();

// A fresh store token: 128 bits from getrandom(2) (else /dev/urandom) as 32 hex digits. Throws
// IoError if the kernel has no randomness to give.
std::string make_store_token();

}  // namespace brigade
