#pragma once
// sync.method = "ps": the job's processes split into roles. The last ps.servers ranks are
// parameter servers (sync/ps/ps_server.h): each owns one contiguous range of the flat parameters
// and its optimizer state, reads no data and writes no run folder. The first N = world -
// ps.servers ranks are workers: they run the one training loop as a data-parallel job of N
// ranks (their own communicator, "workers", for the loss, evaluation and checkpoints), each on
// its slice of the global batch, with PsWorker (sync/ps/ps_worker.h) as the strategy that pushes
// gradients and pulls parameters.
#include "brigade/runtime/config.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/job_plan.h"

namespace brigade {

// Runs this process's role (plan: plan_job over the group, roles = kParameterServers); returns
// the exit code.
int train_with_parameter_servers(const Config& config, ProcessGroup group, const JobPlan& plan);

}  // namespace brigade
