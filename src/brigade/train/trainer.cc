// train(): joins the job's process group and runs the one training loop (training_loop.h) with
// the engine the layout asks for: model parallelism (parallel.tp * parallel.pp > 1,
// model_parallel_engine.h) or data parallelism over whole models (dp_engine.h). Each layout is
// validated before the run folder is created.
#include "brigade/train/trainer.h"

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/monitor/log.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/dp_engine.h"
#include "brigade/train/fed_roles.h"
#include "brigade/train/hybrid_layout.h"
#include "brigade/train/model_parallel_engine.h"
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
  const bool federated = config.sync.method == "fed";
  const bool ps = config.sync.method == "ps";
  ProcessGroup group = join_process_group(config.comm, detect_dist_env(), !federated && !ps);
  detail::set_log_rank(group.rank());
  if (federated) return train_federated(config, std::move(group));
  if (config.sync.method == "ps") return train_with_parameter_servers(config, std::move(group));
  if (is_model_parallel(config)) {
    HybridLayout layout = model_parallel_layout(config, group);
    TrainContext ctx(config, group);
    std::unique_ptr<TrainEngine> engine = make_model_parallel_engine(ctx, std::move(layout));
    return run_training(ctx, *engine);
  }
  const int64_t dp = dp_degree(config, group);
  TrainContext ctx(config, group);
  std::unique_ptr<TrainEngine> engine = make_dp_engine(ctx, dp);
  return run_training(ctx, *engine);
}

}  // namespace brigade
