#pragma once
// The request and response of `brigade serve`'s completions endpoint, in the shape of OpenAI's
// /v1/completions (what OpenAI-compatible servers such as vLLM accept), without the transport:
// a JSON body in, a JSON body out, every field validated and bounded first.
//
// Request: prompt (a string or an array of strings; required), max_tokens (default 16),
// temperature (1), top_p (1), top_k (0 = all; an extension, as vLLM has), stop (a string or an
// array), seed (0), echo (false), n (1 only), stream (false only), model (any: one model is
// served). Fields that would change the answer and are not built (best_of, logprobs, suffix,
// logit_bias, nonzero presence_penalty / frequency_penalty) are refused, not ignored.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/infer/generator.h"

namespace brigade {

// Bounds on one request.
inline constexpr size_t kMaxRequestBytes = size_t{1} << 20;
inline constexpr size_t kMaxPromptsPerRequest = 64;
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopBytes = 256;

// An invalid request: the HTTP status and the message for the client.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct CompletionRequest {
  std::vector<std::string> prompts;
  GenerationOptions options;
  bool echo = false;  // the completion text starts with its prompt
};

// Throws RequestError (400) naming the field. max_tokens_limit bounds max_tokens.
CompletionRequest parse_completion_request(std::string_view body, int64_t max_tokens_limit);

// The response body: one choice per prompt, in order, and token counts (prompt_tokens as the
// tokenizer counts them).
nlohmann::json completion_response(const CompletionRequest& request,
                                   const std::vector<Completion>& completions,
                                   int64_t prompt_tokens, const std::string& id,
                                   const std::string& model, int64_t created);

// {"error": {"message", "type", "code"}}, OpenAI's error shape.
nlohmann::json error_body(int status, const std::string& message);

}  // namespace brigade
