// brigade serve: a GPT checkpoint behind an OpenAI-compatible completions endpoint
// (infer/completion_server.h), on loopback unless a key is given.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/cli/commands.h"
#include "brigade/infer/checkpoint_model.h"
#include "brigade/infer/completion_server.h"
#include "brigade/runtime/dist_env.h"
#include "brigade/runtime/interrupt.h"
#include "brigade/train/trainer.h"

namespace brigade::cli {

namespace {

struct ServeArgs {
  std::string ckpt;
  std::string key_file;
  ServeOptions options;
};

// The key from --key-file (its first line) or BRIGADE_SERVE_KEY; never from the command line,
// where other users could read it in the process list.
std::string serving_key(const std::string& key_file) {
  if (!key_file.empty()) {
    std::string key = read_file(key_file, 4096);
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (key.find('\n') != std::string::npos) {
      throw ConfigError(fmt::format("--key-file {}: the key must be one line", key_file));
    }
    return key;
  }
  const char* env = std::getenv("BRIGADE_SERVE_KEY");
  return env ? env : "";
}

int run_serve(ServeArgs args) {
  if (detect_dist_env().world_size > 1) {
    throw ConfigError("brigade serve runs on one process; start it without brigade launch");
  }
  args.options.api_key = serving_key(args.key_file);
  validate(args.options);
  GenerationCheckpoint ckpt = open_generation_checkpoint(args.ckpt);
  configure_kernels(ckpt.config.train);
  const std::unique_ptr<Gpt> model = load_generation_model(ckpt, nullptr);
  if (args.options.model_name.empty()) args.options.model_name = ckpt.config.run.name;
  CompletionServer server(*model, *ckpt.tokenizer, args.options);
  const InterruptGuard interrupts;
  server.serve(
      [&](int port) {
        std::printf("brigade serve: listening on http://%s:%d (model \"%s\" from %s%s)\n",
                    args.options.host.c_str(), port, args.options.model_name.c_str(),
                    ckpt.dir.c_str(), args.options.api_key.empty() ? "" : "; bearer key required");
        std::fflush(stdout);
      },
      [] { return interrupt_signal() != 0; });
  std::printf("brigade serve: stopped\n");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand(
      "serve", "serve a GPT checkpoint over HTTP (OpenAI-compatible /v1/completions)");
  sub->add_option("--ckpt", args->ckpt, "checkpoint folder, or a run folder (newest checkpoint)")
      ->required();
  sub->add_option("--host", args->options.host,
                  "address to listen on; other than loopback needs a key");
  sub->add_option("--port", args->options.port, "port; 0 = any free one (printed)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--key-file", args->key_file,
                  "file holding the bearer key clients must send (else BRIGADE_SERVE_KEY)");
  sub->add_option("--model-name", args->options.model_name,
                  "model id to report; default: run.name");
  sub->add_option("--max-tokens", args->options.max_tokens, "the most tokens a request may ask for")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  return [args]() { return run_serve(*args); };
}

}  // namespace brigade::cli
