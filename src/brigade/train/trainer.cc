// train(): joins the job's process group, plans it (job_plan.h: roles and mesh, checked before
// the run folder is created) and runs this rank's role: a federation's coordinator or client,
// a parameter server or worker, or a replica running the one training loop (training_loop.h)
// with the engine the plan asks for (engines.h).
#include "brigade/train/trainer.h"

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/monitor/log.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/engines.h"
#include "brigade/train/fed_roles.h"
#include "brigade/train/job_plan.h"
#include "brigade/train/ps_roles.h"
#include "brigade/train/training_loop.h"

namespace brigade {

void configure_kernels(const TrainConfig& train) {
  GemmBackend backend{};
  BRIGADE_CHECK(parse_gemm_backend(train.kernels, &backend))
      << "train.kernels = " << train.kernels << " passed validation";
  set_gemm_backend(backend);
  set_blas_threads(static_cast<int>(train.blas_threads));
  GemmPrecision precision{};
  BRIGADE_CHECK(parse_gemm_precision(train.precision, &precision))
      << "train.precision = " << train.precision << " passed validation";
  set_gemm_precision(precision);  // ConfigError where this CPU or library has no bf16 GEMM
}

int train(const Config& config) {
  configure_kernels(config.train);
  // Federated clients and parameter-server workers may leave and come back: no communicator
  // over the whole job, which a restarted process could not rejoin.
  const bool federated = config.sync.method == SyncKind::kFed;
  const bool ps = config.sync.method == SyncKind::kPs;
  ProcessGroup group = join_process_group(config.comm, detect_dist_env(), !federated && !ps);
  detail::set_log_rank(group.rank());
  const JobPlan plan = plan_job(config, group.size());
  switch (plan.roles) {
    case JobRoles::kFederation:
      return train_federated(config, std::move(group), plan);
    case JobRoles::kParameterServers:
      return train_with_parameter_servers(config, std::move(group), plan);
    case JobRoles::kReplicas:
      break;
  }
  TrainContext ctx(config, group);
  std::unique_ptr<TrainEngine> engine = make_train_engine(ctx, plan);
  return run_training(ctx, *engine);
}

}  // namespace brigade
