// brigade eval: a checkpoint's loss, perplexity and bits per byte (GPT) or accuracy
// (classifier) on validation data, alone or under `brigade launch` in any layout.
#include <memory>

#include "brigade/cli/commands.h"
#include "brigade/train/eval_job.h"

namespace brigade::cli {

void add_eval_options(CLI::App* sub, EvalJob& job) {
  sub->add_option("--ckpt", job.checkpoint,
                  "checkpoint folder, or a run folder (its newest checkpoint)")
      ->required();
  sub->add_option("--data", job.data,
                  "data.path to evaluate on (same data.source); default: the checkpoint's data");
  sub->add_flag("--all", job.whole,
                "evaluate every document of the data (text, fortunes, jsonl), not only the "
                "validation split");
  sub->add_option("--batches", job.batches, "micro-batches to evaluate; 0 = all")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--json", job.json_path, "also write the figures as JSON to this file");
  add_set_option(sub, job.overrides);
}

Command add_eval(CLI::App& app) {
  auto job = std::make_shared<EvalJob>();
  auto* sub = app.add_subcommand(
      "eval", "evaluate a checkpoint: loss, perplexity, bits per byte or accuracy");
  add_eval_options(sub, *job);
  return [job]() { return run_eval_job(*job); };
}

}  // namespace brigade::cli
