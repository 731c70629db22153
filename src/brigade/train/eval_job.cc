#include "brigade/train/eval_job.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/timer.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/engines.h"
#include "brigade/train/job_check.h"
#include "brigade/train/job_plan.h"
#include "brigade/train/trainer.h"
#include "brigade/train/training_loop.h"

namespace brigade {

namespace {

// The checkpoint's config as the evaluation runs it: the same model and data (data.path from
// the job), one data-parallel layout over the job and plain DDP, then the job's overrides;
// validated, and checked against world_size processes and the data paths.
Config evaluation_config(const ShardedCheckpointReader& reader, const EvalJob& job,
                         int64_t world_size) {
  Config base = checkpoint_config(reader);
  base.parallel = ParallelConfig{};
  base.sync = SyncConfig{};
  base.train.init_from.clear();
  if (!job.data.empty()) base.data.path = job.data;
  Config config = parse_config(base.to_toml(), reader.dir() + "/manifest.json", job.overrides);
  config.validate();
  check_world_size(config, world_size);
  check_data_paths(config);
  return config;
}

// Rank 0's report: one line on stdout and, if asked, the same figures as JSON.
void report(const EvalJob& job, const nlohmann::json& figures, const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
  if (!job.json_path.empty()) write_file_atomic(job.json_path, figures.dump(2) + "\n");
}

}  // namespace

void check_eval_job(const EvalJob& job, int64_t world_size) {
  const ShardedCheckpointReader reader =
      ShardedCheckpointReader::open(resolve_checkpoint_dir(job.checkpoint));
  evaluation_config(reader, job, world_size);
}

int run_eval_job(const EvalJob& job) {
  const std::string dir = resolve_checkpoint_dir(job.checkpoint);
  const ShardedCheckpointReader reader = ShardedCheckpointReader::open(dir);
  const DistEnv env = detect_dist_env();
  Config config = evaluation_config(reader, job, env.world_size);
  configure_kernels(config.train);
  config.train.eval_batches = job.batches;  // 0: every micro-batch (EvalIterator)

  ProcessGroup group = join_process_group(config.comm, env);
  detail::set_log_rank(group.rank());
  TrainContext ctx(config, group, RunFolder{.root = dir},
                   load_evaluation_data(config, checkpoint_tokenizer(reader), dir, job.whole));
  std::unique_ptr<TrainEngine> engine = make_train_engine(ctx, plan_job(config, group.size()));
  engine->initialize(static_cast<uint64_t>(config.run.seed));
  int64_t step = 0;
  load_initial_weights(dir, group.world.get(), engine->checkpoint_pieces(), &step);
  engine->after_initial_weights();

  Stopwatch watch;
  const EvalSums sums = engine->evaluate();
  const double seconds = watch.seconds();
  if (group.rank() != 0) return 0;

  const bool gpt = config.model.kind == ModelKind::kGpt;
  nlohmann::json figures = {{"checkpoint", dir},         {"step", step},
                            {"data", ctx.data.summary},  {"ranks", group.size()},
                            {"examples", sums.examples}, {"loss", sums.loss()},
                            {"seconds", seconds}};
  const std::string where = config.data.path.empty()
                                ? std::string(name_of(config.data.source))
                                : fmt::format("{} {}", config.data.source, config.data.path);
  std::string line =
      fmt::format("{} (step {}) on {} of {}: loss {:.4f}", dir, step,
                  job.whole ? "every document" : "the validation split", where, sums.loss());
  if (gpt) {
    // Tokens the loss averages over: every target, or (masked data) the valid ones.
    const double tokens =
        sums.weight > 0 ? sums.weight : sums.examples * static_cast<double>(config.context());
    figures["tokens"] = tokens;
    figures["perplexity"] = std::exp(sums.loss());
    line += fmt::format(", perplexity {:.3f}", std::exp(sums.loss()));
    if (ctx.data.tokenizer) {
      const double bpb = sums.loss() / std::log(2.0) / ctx.data.val_bytes_per_token;
      figures["bits_per_byte"] = bpb;
      line += fmt::format(", {:.4f} bits/byte", bpb);
    }
    line += fmt::format("; {:.0f} sequences ({:.0f} tokens)", sums.examples, tokens);
  } else {
    figures["accuracy"] = sums.accuracy();
    line +=
        fmt::format(", accuracy {:.2f}%; {:.0f} examples", 100 * sums.accuracy(), sums.examples);
  }
  line +=
      fmt::format(" in {:.2f} s on {} rank{}", seconds, group.size(), group.size() > 1 ? "s" : "");
  report(job, figures, line);
  return 0;
}

}  // namespace brigade
