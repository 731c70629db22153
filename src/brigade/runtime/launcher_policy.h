#pragma once
// The elastic agent's decisions, kept apart from processes so that they can be tested alone:
// after a group of workers failed, restart or give up, and with how many workers.
//
// Model: torchrun's elastic agent. A failure of any worker (non-zero exit, death by a signal,
// missed heartbeats; a collective timeout ends a brigade worker with exit code 5) stops the
// whole group, and the group is started again, up to --max-restarts times; the workers resume
// from the latest complete checkpoint by themselves. torchrun re-forms its group with the nodes
// that are left when a node is lost (--nnodes MIN:MAX); on one host, brigade treats the slot of
// the worker that failed as such a lost node: with --min-nproc M < --nproc, each restart has one
// worker fewer than the group that failed, down to M, and from then on keeps M. Without
// --min-nproc every restart uses all --nproc workers.
//
// Not restarted, because a restart would fail the same way: a brigade worker's exit code 2 (the
// config is invalid), 3 (a data, tokenizer or config file is missing or corrupt: the restarted
// worker reads the same file) and 6 (the loss became non-finite: resuming replays the same
// steps). A checkpoint that cannot be used is exit code 4 and is restarted, because the restart
// falls back to the previous valid checkpoint. With --exec the worker is not brigade and every
// failure is retried.
#include <string>

#include "brigade/runtime/launcher.h"
#include "brigade/runtime/launcher_group.h"

namespace brigade {

struct RestartDecision {
  bool restart = false;
  int nproc = 0;       // restart: the size of the next group
  std::string reason;  // !restart: why not, for the log ("no restart left (2 of 2 used)")
};

// `failure` ended a group of `nproc` workers (failure.kind == kWorkerFailed) after
// `restarts_done` restarts.
RestartDecision decide_restart(const LaunchOptions& options, int restarts_done, int nproc,
                               const GroupOutcome& failure);

}  // namespace brigade
