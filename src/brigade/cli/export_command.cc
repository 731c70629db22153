// brigade export: writes a GPT checkpoint as a Hugging Face GPT2LMHeadModel folder
// (model.safetensors + config.json), with its tokenizer as Hugging Face tokenizers reads it
// (tokenizer.json, tokenizer_config.json) and the run's BPE merges when it has them. A run with
// LoRA adapters exports as the plain GPT-2 they merge into (model/lora_merge.h), or with
// --lora peft as its base GPT-2 plus the adapters as PEFT saves them (ckpt/peft_adapter.h).
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/hf_gpt2.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/ckpt/peft_adapter.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/cli/commands.h"
#include "brigade/data/bpe.h"
#include "brigade/data/hf_tokenizer.h"
#include "brigade/model/gpt.h"
#include "brigade/model/lora_merge.h"
#include "brigade/runtime/config.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/model_factory.h"

namespace brigade::cli {

namespace {

constexpr const char* kMergesFile = "tokenizer.bpe";
constexpr const char* kHfTokenizerFile = "tokenizer.json";
constexpr const char* kHfTokenizerConfigFile = "tokenizer_config.json";

struct ExportArgs {
  std::string ckpt;
  std::string format = "hf";
  std::string lora = "merge";
  std::string out;
};

int run_export(const ExportArgs& args) {
  if (args.format != "hf") {
    throw ConfigError(fmt::format("--format = \"{}\": allowed values are \"hf\"", args.format));
  }
  if (args.lora != "merge" && args.lora != "peft") {
    throw ConfigError(
        fmt::format("--lora = \"{}\": allowed values are \"merge\", \"peft\"", args.lora));
  }
  const bool peft = args.lora == "peft";
  const std::string dir = resolve_checkpoint_dir(args.ckpt);
  // Writing model.safetensors into the checkpoint itself would break its checksums.
  std::error_code ec;
  if (std::filesystem::equivalent(dir, args.out, ec)) {
    throw ConfigError(
        fmt::format("--out = \"{}\" is the checkpoint folder itself; choose "
                    "another folder",
                    args.out));
  }
  // Either format: the whole tensors, assembled from whatever shards wrote them.
  const ShardedCheckpointReader reader = ShardedCheckpointReader::open(dir);
  Config config = checkpoint_config(reader);
  if (config.model.kind != ModelKind::kGpt) {
    throw ConfigError(
        fmt::format("model.kind = \"{}\" in {}: only GPT checkpoints export to Hugging Face GPT-2",
                    config.model.kind, dir));
  }
  const GptConfig trained = gpt_config(config.model);  // with its experts, if it has them
  if (peft && !trained.lora()) {
    throw ConfigError(fmt::format(
        "--lora = \"peft\": {} has no LoRA adapters (lora.rank = 0); export it without --lora",
        dir));
  }
  Gpt model(trained, 1);
  load_model_weights(reader, model);
  // LoRA adapters are merged into the weights they adapt (the folder holds a plain GPT-2), or
  // written beside their base model for PEFT.
  const GptConfig gpt = without_lora(trained);
  ParamLayout layout;
  std::vector<ParamGroup> groups;
  build_gpt_layout(gpt, make_gpt_shard(gpt, 1, 0), layout, groups);
  std::vector<float> params(static_cast<size_t>(layout.total()));
  merge_lora_into_base(peft ? gpt : trained, model.layout(), model.params(), layout, params.data());

  StMetadata metadata = {{"brigade_checkpoint", dir},
                         {"brigade_step", std::to_string(reader.step())}};
  if (trained.lora() && !peft)
    metadata["brigade_lora_merged"] =
        fmt::format("rank {}, alpha {}", trained.lora_rank, trained.lora_alpha);
  save_hf_gpt2(args.out, gpt, layout, params.data(), metadata);
  if (peft) {
    save_peft_adapter(args.out, trained, model.layout(), model.params(), metadata);
  } else {
    // PEFT would apply a stale adapter from an earlier export onto these merged weights again.
    for (const char* f : {kPeftConfigFile, kPeftWeightsFile}) remove_all(args.out + "/" + f);
    fsync_dir(args.out);
  }
  // The merges go along so `brigade import` (and a person) can tokenize as the model was
  // trained. A byte-level model has none: drop a stale copy from an earlier export.
  const std::string merges_out = args.out + "/" + kMergesFile;
  const std::optional<std::string> merges = checkpoint_tokenizer(reader);
  const bool has_merges = merges.has_value();
  if (has_merges) {
    write_file_atomic(merges_out, *merges);
  } else {
    remove_all(merges_out);
    fsync_dir(args.out);
  }
  // The same tokenizer for Hugging Face `tokenizers` / AutoTokenizer (data/hf_tokenizer.h).
  const BpeTokenizer tokenizer =
      has_merges ? BpeTokenizer::parse(*merges, dir + "/" + kMergesFile) : BpeTokenizer();
  write_file_atomic(args.out + "/" + kHfTokenizerFile, hf_tokenizer_json(tokenizer));
  write_file_atomic(args.out + "/" + kHfTokenizerConfigFile,
                    hf_tokenizer_config_json(config.model.seq_len));
  std::printf(
      "exported step %lld of %s to %s: %s (%zu tensors, %lld parameters, F32; "
      "lm_head.weight omitted: it is tied to transformer.wte.weight%s), %s%s%s%s\n",
      static_cast<long long>(reader.step()), dir.c_str(), args.out.c_str(), kHfWeightsFile,
      layout.specs().size(), static_cast<long long>(layout.total()),
      !trained.lora() ? ""
      : peft          ? fmt::format("; the base weights, and LoRA adapters of rank {} in {} and {} "
                                             "(PEFT: PeftModel.from_pretrained loads them)",
                                    trained.lora_rank, kPeftWeightsFile, kPeftConfigFile)
                   .c_str()
             : fmt::format("; LoRA adapters of rank {} merged into their layers", trained.lora_rank)
                   .c_str(),
      kHfConfigFile,
      gpt.moe() ? " (model_type brigade_gpt2_moe: transformers has no GPT-2 with experts; "
                  "brigade import reads it)"
                : "",
      has_merges ? ", tokenizer.bpe (brigade's BPE merges)" : "",
      fmt::format(", {} and {} ({}; AutoTokenizer loads them)", kHfTokenizerFile,
                  kHfTokenizerConfigFile,
                  has_merges ? fmt::format("byte-level BPE, {} ids", tokenizer.vocab_size())
                             : "byte-level tokens: ids 0-255 are the raw bytes")
          .c_str());
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* sub = app.add_subcommand("export",
                                 "write a GPT checkpoint as a Hugging Face GPT2LMHeadModel folder");
  sub->add_option("--ckpt", args->ckpt, "checkpoint folder, or a run folder (newest checkpoint)")
      ->required();
  sub->add_option("--format", args->format, "output format: hf (Hugging Face transformers)");
  sub->add_option("--lora", args->lora,
                  "a LoRA run's adapters: merge (into the weights, default) or peft (the base "
                  "model plus adapter_model.safetensors and adapter_config.json)");
  sub->add_option("--out", args->out, "output folder (created; files in it are replaced)")
      ->required();
  return [args]() { return run_export(*args); };
}

}  // namespace brigade::cli
