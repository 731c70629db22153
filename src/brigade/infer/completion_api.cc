#include "brigade/infer/completion_api.h"

#include <fmt/format.h>

namespace brigade {

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw RequestError(400, message);
}

// A list of strings given as one string or an array of them.
std::vector<std::string> strings_of(const nlohmann::json& v, const char* field, size_t max_count,
                                    size_t max_bytes) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > max_count) bad(fmt::format("{}: at most {} entries", field, max_count));
    for (const auto& e : v) {
      if (!e.is_string()) bad(fmt::format("{}: every entry must be a string", field));
      out.push_back(e.get<std::string>());
    }
  } else {
    bad(fmt::format("{}: must be a string or an array of strings", field));
  }
  for (const std::string& s : out) {
    if (s.size() > max_bytes)
      bad(fmt::format("{}: an entry is longer than {} bytes", field, max_bytes));
  }
  return out;
}

double number(const nlohmann::json& body, const char* field, double fallback, double lo,
              double hi) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number()) bad(fmt::format("{}: must be a number", field));
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) bad(fmt::format("{}: {} is outside [{}, {}]", field, v, lo, hi));
  return v;
}

int64_t integer(const nlohmann::json& body, const char* field, int64_t fallback, int64_t lo,
                int64_t hi) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) bad(fmt::format("{}: must be an integer", field));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) bad(fmt::format("{}: {} is outside [{}, {}]", field, v, lo, hi));
  return v;
}

bool flag(const nlohmann::json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) bad(fmt::format("{}: must be true or false", field));
  return it->get<bool>();
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body_text, int64_t max_tokens_limit) {
  if (body_text.size() > kMaxRequestBytes) {
    throw RequestError(413, fmt::format("the body is larger than {} bytes", kMaxRequestBytes));
  }
  // Nesting is bounded by the fields read: only top-level scalars and flat arrays are used.
  nlohmann::json body = nlohmann::json::parse(body_text, nullptr, false);
  if (body.is_discarded()) bad("the body is not valid JSON");
  if (!body.is_object()) bad("the body must be a JSON object");
  CompletionRequest r;
  const auto prompt = body.find("prompt");
  if (prompt == body.end()) bad("prompt: required");
  r.prompts = strings_of(*prompt, "prompt", kMaxPromptsPerRequest, kMaxRequestBytes);
  if (r.prompts.empty()) bad("prompt: no prompt given");
  GenerationOptions& o = r.options;
  o.max_new_tokens = integer(body, "max_tokens", 16, 1, max_tokens_limit);
  o.sampling.temperature = number(body, "temperature", 1.0, 0.0, 100.0);
  o.sampling.top_p = number(body, "top_p", 1.0, 1e-9, 1.0);
  o.sampling.top_k = integer(body, "top_k", 0, 0, int64_t{1} << 24);
  o.sampling.seed = static_cast<uint64_t>(integer(body, "seed", 0, 0, int64_t{1} << 62));
  if (const auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
    o.stop = strings_of(*stop, "stop", kMaxStopStrings, kMaxStopBytes);
    for (const std::string& s : o.stop) {
      if (s.empty()) bad("stop: a stop string must not be empty");
    }
  }
  o.batch = static_cast<int64_t>(r.prompts.size());
  r.echo = flag(body, "echo");
  if (integer(body, "n", 1, 1, 1) != 1) bad("n: only 1");
  if (flag(body, "stream")) bad("stream: streamed responses are not supported; set it false");
  for (const char* f : {"best_of", "logprobs", "suffix", "logit_bias"}) {
    if (body.contains(f) && !body.at(f).is_null()) bad(fmt::format("{}: not supported", f));
  }
  for (const char* f : {"presence_penalty", "frequency_penalty"}) {
    if (number(body, f, 0.0, -2.0, 2.0) != 0.0) bad(fmt::format("{}: not supported", f));
  }
  return r;
}

nlohmann::json completion_response(const CompletionRequest& request,
                                   const std::vector<Completion>& completions,
                                   int64_t prompt_tokens, const std::string& id,
                                   const std::string& model, int64_t created) {
  nlohmann::json choices = nlohmann::json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < completions.size(); ++i) {
    const Completion& c = completions[i];
    completion_tokens += c.new_tokens;
    choices.push_back({{"text", request.echo ? request.prompts[i] + c.text : c.text},
                       {"index", i},
                       {"logprobs", nullptr},
                       {"finish_reason", c.finish}});
  }
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}}}};
}

nlohmann::json error_body(int status, const std::string& message) {
  const char* type = status == 401 ? "authentication_error" : "invalid_request_error";
  return {{"error", {{"message", message}, {"type", type}, {"code", status}}}};
}

}  // namespace brigade
