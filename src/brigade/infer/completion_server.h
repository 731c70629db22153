#pragma once
// `brigade serve`: an HTTP server (cpp-httplib, Debian's libcpp-httplib-dev) in front of one
// Generator, speaking OpenAI's completions API (completion_api.h):
//   POST /v1/completions   a completion of each prompt (greedy, sampled, stop strings, a seed)
//   GET  /v1/models        the one model served
//   GET  /health           {"status": "ok"}
// It binds to loopback unless told otherwise, and then demands a bearer key: a server reachable
// from other machines never answers anyone who does not hold it (`Authorization: Bearer KEY`,
// compared in constant time; the key is never logged). Requests run one at a time on the model
// (the prompts of one request are batched together); bodies are capped at 1 MiB and reading one
// times out after 10 s.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "brigade/data/tokenizer.h"
#include "brigade/model/gpt.h"

namespace brigade {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;            // 0: any free port
  std::string api_key;        // "": none (allowed on loopback only)
  std::string model_name;     // reported as the model id
  int64_t max_tokens = 1024;  // the largest max_tokens a request may ask for
};

// Throws ConfigError for a non-loopback host without a key or a key shorter than 16 bytes.
void validate(const ServeOptions& options);

class CompletionServer {
 public:
  CompletionServer(Gpt& model, const Tokenizer& tokenizer, ServeOptions options);
  ~CompletionServer();

  // Binds and serves until stop() (or should_stop() turns true, polled every 100 ms).
  // on_listening(port) is called once bound. Throws IoError when the address cannot be bound.
  void serve(const std::function<void(int)>& on_listening,
             const std::function<bool()>& should_stop);
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade
