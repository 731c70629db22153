// brigade import: turns a Hugging Face GPT-2 folder (config.json + model.safetensors) into the
// step-0 checkpoint of a new run, so that `brigade train` with the same config fine-tunes it.
//
// The checkpoint is what the trainer itself would write at step 0: the weights, a fresh (zero)
// optimizer state of the configured optimizer, the resolved config and provenance. It holds no
// "sampler" entry: at step 0 no data has been consumed, so there is no position to check, and
// computing one would mean loading (for BPE, tokenizing) the whole dataset here; the trainer
// skips the sampler check when the entry is absent and starts the data order from step 0.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/hf_gpt2.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/cli/commands.h"
#include "brigade/model/gpt.h"
#include "brigade/optim/optimizer.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/model_factory.h"

namespace brigade::cli {

namespace {

constexpr const char* kMergesFile = "tokenizer.bpe";

struct ImportArgs {
  std::string from;
  std::string config;
  std::vector<std::string> overrides;
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The [model] section must describe exactly the architecture in config.json.
void check_same_architecture(const Config& config, const std::string& config_path,
                             const GptConfig& hf, const std::string& hf_path) {
  struct Pair {
    const char* ours;
    int64_t our_value;
    const char* theirs;
    int64_t their_value;
  };
  const Pair pairs[] = {
      {"model.vocab", config.model.vocab, "vocab_size", hf.vocab},
      {"model.seq_len", config.model.seq_len, "n_positions", hf.seq_len},
      {"model.d_model", config.model.d_model, "n_embd", hf.d_model},
      {"model.n_layer", config.model.n_layer, "n_layer", hf.n_layer},
      {"model.n_head", config.model.n_head, "n_head", hf.n_head},
      {"model.n_experts", config.model.n_experts, "num_local_experts", hf.n_experts},
      {"model.moe_top_k", hf.moe() ? config.model.moe_top_k : hf.moe_top_k, "num_experts_per_tok",
       hf.moe_top_k},
      {"model.moe_every", hf.moe() ? config.model.moe_every : hf.moe_every, "moe_every",
       hf.moe_every}};
  std::string diffs;
  for (const Pair& p : pairs) {
    if (p.our_value != p.their_value) {
      diffs += fmt::format("{}{} = {} but {} = {}", diffs.empty() ? "" : "; ", p.ours, p.our_value,
                           p.theirs, p.their_value);
    }
  }
  if (!diffs.empty()) {
    throw ConfigError(
        fmt::format("{} and {} disagree: {} (the [model] section must describe the "
                    "imported model; use --set model.KEY=VALUE)",
                    config_path, hf_path, diffs));
  }
}

// Refuses a run folder that already has checkpoints: the import would mix two histories.
void check_no_checkpoints(const RunFolder& folder) {
  std::error_code ec;
  std::filesystem::directory_iterator it(folder.checkpoints(), ec);
  if (ec) return;  // absent: a new run
  std::vector<std::string> found;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (parse_step_dir_name(name) || parse_step_tmp_name(name) || name == kLatestFileName) {
      found.push_back(name);
    }
  }
  if (!found.empty()) {
    std::sort(found.begin(), found.end());
    throw ConfigError(fmt::format(
        "run folder {} already has checkpoints ({}): import starts a new run; choose another "
        "run.name or run.out_dir, or remove {}",
        folder.root, fmt::join(found, ", "), folder.checkpoints()));
  }
}

// Which merges file the run will tokenize with, checked against the one the model came with.
// Returns the file to store in the checkpoint ("" for byte tokens). Copies nothing yet.
std::string check_tokenizer(const Config& config, const std::string& from) {
  const std::string hf_merges = from + "/" + kMergesFile;
  const bool has_hf = file_exists(hf_merges);
  if (config.data.source == DataSource::kShards) {
    const std::string shard_merges = config.data.path + "/" + kMergesFile;
    const bool has_shard = file_exists(shard_merges);
    if (has_hf && !has_shard) {
      throw ConfigError(
          fmt::format("data.path = \"{}\": the shards are byte tokens, but the "
                      "model was trained with the BPE merges in {}",
                      config.data.path, hf_merges));
    }
    if (has_hf && read_file(hf_merges) != read_file(shard_merges)) {
      throw ConfigError(
          fmt::format("data.path = \"{}\": the shards were tokenized with {}, "
                      "which differs from the model's merges in {}",
                      config.data.path, shard_merges, hf_merges));
    }
    if (!has_hf && has_shard) {
      std::fprintf(stderr,
                   "brigade import: note: %s has no %s; the shards' merges %s will give token "
                   "ids a meaning the imported embeddings may not share\n",
                   from.c_str(), kMergesFile, shard_merges.c_str());
    }
    return has_shard ? shard_merges : "";
  }
  if (has_hf && config.data.tokenizer != TokenizerKind::kBpe) {
    throw ConfigError(
        fmt::format("data.tokenizer = \"{}\": the model was trained with the BPE "
                    "merges in {}; set data.tokenizer = \"bpe\"",
                    config.data.tokenizer, hf_merges));
  }
  if (!has_hf && config.data.tokenizer == TokenizerKind::kBpe) {
    std::fprintf(stderr,
                 "brigade import: note: %s has no %s; `brigade train` will learn new BPE merges "
                 "whose token ids are unrelated to the imported embeddings\n",
                 from.c_str(), kMergesFile);
  }
  return has_hf ? hf_merges : "";
}

int run_import(const ImportArgs& args) {
  Config config = load_config(args.config, args.overrides);
  config.validate();
  if (config.model.kind != ModelKind::kGpt) {
    throw ConfigError(
        fmt::format("model.kind = \"{}\": import reads GPT-2 models (\"gpt\")", config.model.kind));
  }
  if (config.model.lora_rank > 0) {
    throw ConfigError(fmt::format(
        "lora.rank = {}: import writes a base model; import with lora.rank = 0, then start the "
        "LoRA run from it with train.init_from (its adapters start fresh)",
        config.model.lora_rank));
  }
  if (config.run.resume != ResumeMode::kAuto) {
    throw ConfigError(
        fmt::format("run.resume = \"{}\": `brigade train` would ignore the imported "
                    "checkpoint; use \"auto\"",
                    config.run.resume));
  }
  std::string from = args.from;
  while (from.size() > 1 && from.back() == '/') from.pop_back();

  // Validate everything before writing anything.
  const GptConfig hf = load_hf_gpt2_config(from);
  check_same_architecture(config, args.config, hf, from + "/" + kHfConfigFile);
  const RunFolder folder = run_folder_of(config);
  check_no_checkpoints(folder);
  std::string merges = check_tokenizer(config, from);
  auto model = make_model(config.model, 1);
  load_hf_gpt2_weights(from, hf, model->layout(), model->params());
  auto optimizer =
      make_optimizer(optimizer_config(config.train), model->layout(), 0, model->num_params());

  create_run_folder(config);
  if (merges == from + "/" + kMergesFile && config.data.source != DataSource::kShards) {
    // Where the trainer looks for the run's BPE before training new merges.
    write_file_atomic(folder.tokenizer_path(), read_file(merges));
    merges = folder.tokenizer_path();
  }
  nlohmann::json prov =
      provenance(config, {from + "/" + kHfConfigFile, from + "/" + kHfWeightsFile});
  prov["imported_from"] = std::filesystem::absolute(from).lexically_normal().string();
  write_run_manifest(folder, prov);
  SavedState state{
      .step = 0, .updates = 0, .extra = {{"config", config.to_toml()}, {"provenance", prov}}};
  const std::string dir = save_checkpoint(folder.checkpoints(), state, *model, *optimizer,
                                          static_cast<int>(config.train.keep_checkpoints), merges);
  std::printf(
      "imported %s (%lld parameters) into %s; `brigade train %s` with the same --set "
      "options fine-tunes it from step 0\n",
      from.c_str(), static_cast<long long>(model->num_params()), dir.c_str(), args.config.c_str());
  return 0;
}

}  // namespace

Command add_import(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  auto* sub = app.add_subcommand(
      "import", "start a run from a Hugging Face GPT-2 folder (config.json + model.safetensors)");
  sub->add_option("--from", args->from, "folder holding config.json and model.safetensors")
      ->required();
  sub->add_option("--config", args->config, "TOML config of the run to create")->required();
  add_set_option(sub, args->overrides);
  return [args]() { return run_import(*args); };
}

}  // namespace brigade::cli
