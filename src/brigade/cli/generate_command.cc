// brigade generate: text from a GPT checkpoint (infer/generator.h): one prompt streamed to
// stdout, or a prompts file (one per line) answered as JSON lines; greedy, temperature, top-k,
// top-p, stop strings, a seed; on the key-value cache with continuous batching. Under
// `brigade launch --nproc N` the model is split N ways by tensor parallelism, or with
// --set parallel.pp=P into P pipeline stages of N / P tensor-parallel ranks each
// (infer/generation_layout.h); every rank gets the same tokens; rank 0 prints.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/cli/commands.h"
#include "brigade/comm/mesh.h"
#include "brigade/infer/checkpoint_model.h"
#include "brigade/infer/generation_layout.h"
#include "brigade/infer/generator.h"
#include "brigade/model/gpt.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/trainer.h"

namespace brigade::cli {

namespace {

// Bounds on a prompts file: it is read whole.
constexpr int64_t kMaxPromptsBytes = int64_t{64} << 20;
constexpr size_t kMaxPrompts = 100'000;

struct GenerateArgs {
  std::string ckpt;
  std::string prompt;
  std::string prompts_file;
  GenerationOptions options;
  int64_t seed = 0;
  bool no_kv_cache = false;
  std::vector<std::string> overrides;  // --set: the layout (generation_layout.h)
};

std::vector<std::string> read_prompts(const std::string& path) {
  std::istringstream in(read_file(path, kMaxPromptsBytes));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (prompts.size() == kMaxPrompts) {
      throw ConfigError(fmt::format("--prompts {}: more than {} prompts", path, kMaxPrompts));
    }
    prompts.push_back(std::move(line));
  }
  if (prompts.empty()) throw ConfigError(fmt::format("--prompts {}: no prompt in it", path));
  return prompts;
}

// The layout over the job's world_size processes; ConfigError for one that cannot run.
GenerationLayout generation_layout(const GenerateArgs& args, const GenerationCheckpoint& ckpt,
                                   int world_size) {
  const GenerationLayout layout =
      resolve_generation_layout(gpt_config(ckpt.config.model), args.overrides, world_size);
  if (args.no_kv_cache && world_size > 1) {
    throw ConfigError(fmt::format(
        "--no-kv-cache: the full-forward baseline runs on one process only (this job has {})",
        world_size));
  }
  return layout;
}

int run_generate(GenerateArgs args) {
  GenerationCheckpoint ckpt = open_generation_checkpoint(args.ckpt);
  std::vector<std::string> prompts = args.prompts_file.empty()
                                         ? std::vector<std::string>{args.prompt}
                                         : read_prompts(args.prompts_file);
  configure_kernels(ckpt.config.train);
  // The layout over the job's processes, checked before any process joins.
  const DistEnv env = detect_dist_env();
  const GenerationLayout layout = generation_layout(args, ckpt, env.world_size);
  ProcessGroup group = join_process_group(ckpt.config.comm, env);
  detail::set_log_rank(group.rank());
  // pp = 1: the whole model, split over the world by tensor parallelism (none alone). pp > 1:
  // this rank's stage of the pp x tp mesh, tp within it.
  std::unique_ptr<Gpt> model;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<StageWeights> stage;
  GenerationModel generation;
  if (layout.pp == 1) {
    model = load_generation_model(ckpt, group.world.get());
    generation = whole_model(*model);
  } else {
    mesh = std::make_unique<Mesh>(MeshShape{.pp = layout.pp, .tp = layout.tp}, group.world_options);
    mesh->init_comms();
    const auto s = static_cast<size_t>(mesh->coord(MeshAxis::kPP));
    Communicator* tp = layout.tp > 1 ? &mesh->comm(MeshAxis::kTP) : nullptr;
    stage =
        load_generation_stage(ckpt, layout.stage_bounds[s], layout.stage_bounds[s + 1],
                              TpContext{.comm = tp, .sequence_parallel = false}, group.world.get());
    generation = {.stage = stage->decoder_weights(), .pp = &mesh->comm(MeshAxis::kPP)};
  }
  const GptConfig& gpt = generation.config();
  const Tokenizer& tokenizer = *ckpt.tokenizer;

  const bool print = group.rank() == 0;
  args.options.sampling.seed = static_cast<uint64_t>(args.seed);
  args.options.kv_cache = !args.no_kv_cache;
  if (args.options.kv_cache && gpt.n_experts > 0) {
    if (print) std::fputs("brigade generate: MoE model: without the key-value cache\n", stderr);
    args.options.kv_cache = false;
  }
  Generator generator(generation, tokenizer, args.options);
  const bool stream = args.prompts_file.empty();
  TextCallback on_text;
  if (stream && print) {
    std::fputs(args.prompt.c_str(), stdout);
    on_text = [](size_t, std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }
  const std::vector<Completion> completions = generator.run(prompts, on_text);
  if (!print) return 0;
  if (stream) {
    std::fputc('\n', stdout);
  } else {
    for (size_t i = 0; i < completions.size(); ++i) {
      const nlohmann::json line = {{"index", i},
                                   {"prompt", prompts[i]},
                                   {"completion", completions[i].text},
                                   {"tokens", completions[i].new_tokens},
                                   {"finish", completions[i].finish}};
      const std::string text =
          line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  }
  std::fflush(stdout);  // the completions before the statistics, in a shared pipe too
  const GenerationStats& st = generator.stats();
  std::fprintf(stderr,
               "brigade generate: %lld tokens for %zu prompt(s) in %.2f s: %.1f tokens/s (%s, "
               "batch %lld, %d rank(s), pp %d x tp %d; %lld token rows through the model in %lld "
               "steps)\n",
               static_cast<long long>(st.new_tokens), prompts.size(), st.seconds,
               st.seconds > 0 ? static_cast<double>(st.new_tokens) / st.seconds : 0.0,
               args.options.kv_cache ? "key-value cache" : "full window per token",
               static_cast<long long>(args.options.kv_cache ? args.options.batch : 1), group.size(),
               layout.pp, layout.tp, static_cast<long long>(st.processed_tokens),
               static_cast<long long>(st.steps));
  return 0;
}

void add_generate_options(CLI::App* sub, GenerateArgs* args) {
  sub->add_option("--ckpt", args->ckpt, "checkpoint folder, or a run folder (newest checkpoint)")
      ->required();
  auto* prompt = sub->add_option("--prompt", args->prompt, "text to continue (streamed)");
  sub->add_option("--prompts", args->prompts_file,
                  "file of prompts, one per line; answers as JSON lines, in order")
      ->excludes(prompt);
  GenerationOptions& o = args->options;
  sub->add_option("--tokens", o.max_new_tokens, "tokens to generate per prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--temperature", o.sampling.temperature, "softmax temperature; 0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", o.sampling.top_k, "sample among the k most likely tokens; 0 = all")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub->add_option("--top-p", o.sampling.top_p,
                  "then among the most likely tokens whose probability reaches p; 1 = all")
      ->check(CLI::Range(1e-9, 1.0));
  sub->add_option("--stop", o.stop, "end a completion at this string (repeat for several)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("");
  sub->add_option("--seed", args->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--batch", o.batch, "prompts decoded together")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  sub->add_flag("--no-kv-cache", args->no_kv_cache,
                "rerun the whole window per token (the baseline; one process)");
  sub->add_option("--set", args->overrides,
                  "the layout over the job's processes, one per --set: parallel.pp (pipeline "
                  "stages), parallel.tp (tensor-parallel ranks per stage: processes / pp), "
                  "parallel.layer_split (blocks per stage; balanced by default)")
      ->type_name("KEY=VALUE")
      ->default_str("")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace

void check_generate_job(const std::vector<std::string>& args_reversed, int world_size) {
  CLI::App app("worker");
  GenerateArgs args;
  add_generate_options(&app, &args);
  try {
    app.parse(std::vector<std::string>(args_reversed));
  } catch (const CLI::ParseError&) {
    return;  // the worker reports its own command-line errors
  }
  const GenerationCheckpoint ckpt = open_generation_checkpoint(args.ckpt);
  if (!args.prompts_file.empty()) read_prompts(args.prompts_file);
  generation_layout(args, ckpt, world_size);
}

Command add_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  add_generate_options(app.add_subcommand("generate", "sample text from a GPT checkpoint"),
                       args.get());
  return [args]() { return run_generate(*args); };
}

}  // namespace brigade::cli
