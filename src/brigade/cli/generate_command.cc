// brigade generate: samples text from a GPT checkpoint (temperature, top-k).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>

#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/manifest.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/cli/commands.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/model/gpt.h"
#include "brigade/runtime/config.h"
#include "brigade/tensor/rng.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/model_factory.h"
#include "brigade/train/trainer.h"

namespace brigade::cli {

namespace {

struct GenerateArgs {
  std::string ckpt;
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 40;
  int64_t seed = 0;
};

// Samples from softmax(logits / temperature) restricted to the top_k largest logits.
int32_t sample_token(const float* logits, int64_t V, const GenerateArgs& args,
                     std::vector<int32_t>& order, std::vector<double>& probs, uint64_t index) {
  std::iota(order.begin(), order.end(), 0);
  int64_t k = args.top_k > 0 ? std::min(args.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (args.temperature <= 0) return order[0];
  double max_logit = logits[order[0]], sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    probs[i] = std::exp((logits[order[i]] - max_logit) / args.temperature);
    sum += probs[i];
  }
  double u = random_uniform(static_cast<uint64_t>(args.seed), hash_name("generate"), index) * sum;
  for (int64_t i = 0; i < k; ++i) {
    u -= probs[i];
    if (u <= 0) return order[i];
  }
  return order[k - 1];
}

int run_generate(const GenerateArgs& args) {
  std::string dir = resolve_checkpoint_dir(args.ckpt);
  const ShardedCheckpointReader reader = ShardedCheckpointReader::open(dir);
  if (!reader.state().contains("config") || !reader.state().at("config").is_string()) {
    throw CheckpointError(fmt::format("{}/manifest.json holds no config", dir));
  }
  Config config = parse_config(reader.state().at("config").get<std::string>(), dir);
  if (config.model.kind != "gpt") {
    throw ConfigError(
        fmt::format("model.kind = \"{}\": generate needs a gpt checkpoint", config.model.kind));
  }
  std::unique_ptr<Tokenizer> tokenizer;
  if (const std::optional<std::string> merges = checkpoint_tokenizer(reader)) {
    tokenizer =
        std::make_unique<BpeTokenizer>(BpeTokenizer::parse(*merges, dir + "/tokenizer.bpe"));
  } else {
    tokenizer = std::make_unique<ByteTokenizer>();
  }
  // Prompt ids index the embedding: a tokenizer larger than the model's vocabulary (a merges
  // file that does not belong to this checkpoint) is refused rather than read past the table.
  if (tokenizer->vocab_size() > config.model.vocab) {
    throw CheckpointError(fmt::format(
        "{}: its tokenizer has {} ids but model.vocab = {}; the tokenizer does not belong to "
        "this checkpoint",
        dir, tokenizer->vocab_size(), config.model.vocab));
  }
  configure_kernels(config.train);
  auto model = make_model(config.model, 1);
  load_model_weights(reader, *model);
  auto& gpt = static_cast<Gpt&>(*model);
  const int64_t T = config.model.seq_len, V = config.model.vocab;

  std::vector<int32_t> context = tokenizer->encode(args.prompt);
  if (context.empty()) context.push_back(tokenizer->encode("\n")[0]);
  Batch batch;
  batch.size = 1;
  batch.tokens.resize(static_cast<size_t>(T));
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::vector<double> probs(static_cast<size_t>(V));
  std::vector<int32_t> generated;
  std::fputs(args.prompt.c_str(), stdout);
  for (int64_t i = 0; i < args.tokens; ++i) {
    // The window is the last (at most T) tokens.
    int64_t n = std::min<int64_t>(static_cast<int64_t>(context.size()), T);
    std::copy(context.end() - n, context.end(), batch.tokens.begin());
    batch.seq_len = n;
    const float* logits = gpt.forward_logits(batch) + (n - 1) * V;
    int32_t next = sample_token(logits, std::min<int64_t>(V, tokenizer->vocab_size()), args, order,
                                probs, static_cast<uint64_t>(i));
    context.push_back(next);
    std::string piece = tokenizer->decode(std::span<const int32_t>(&next, 1));
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  }
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "sample text from a GPT checkpoint");
  sub->add_option("--ckpt", args->ckpt, "checkpoint folder, or a run folder (newest checkpoint)")
      ->required();
  sub->add_option("--prompt", args->prompt, "text to continue");
  sub->add_option("--tokens", args->tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temperature", args->temperature, "softmax temperature; 0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", args->top_k, "sample among the k most likely tokens; 0 = all")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--seed", args->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  return [args]() { return run_generate(*args); };
}

}  // namespace brigade::cli
