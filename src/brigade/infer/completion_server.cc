#include "brigade/infer/completion_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sodium.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>

#include "brigade/base/error.h"
#include "brigade/infer/completion_api.h"
#include "brigade/infer/generator.h"

namespace brigade {

namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

bool same_key(const std::string& given, const std::string& key) {
  return given.size() == key.size() && sodium_memcmp(given.data(), key.data(), key.size()) == 0;
}

void reply_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

}  // namespace

void validate(const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    throw ConfigError(fmt::format("--port {}: must be in [0, 65535]", o.port));
  }
  if (!o.api_key.empty() && o.api_key.size() < 16) {
    throw ConfigError("the serving key (BRIGADE_SERVE_KEY or --key-file) is shorter than 16 bytes");
  }
  if (!is_loopback(o.host) && o.api_key.empty()) {
    throw ConfigError(fmt::format(
        "--host {}: a server reachable from other machines needs a key (BRIGADE_SERVE_KEY or "
        "--key-file); without one, serve on 127.0.0.1",
        o.host));
  }
  if (o.max_tokens < 1)
    throw ConfigError(fmt::format("--max-tokens {}: must be >= 1", o.max_tokens));
}

struct CompletionServer::Impl {
  Gpt& model;
  const Tokenizer& tokenizer;
  ServeOptions options;
  httplib::Server http;
  std::mutex generate;  // one request at a time on the model
  std::atomic<int64_t> requests{0};

  Impl(Gpt& m, const Tokenizer& t, ServeOptions o)
      : model(m), tokenizer(t), options(std::move(o)) {}

  bool authorized(const httplib::Request& req, httplib::Response& res) const {
    if (options.api_key.empty()) return true;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), options.api_key)) {
      return true;
    }
    reply_json(res, 401, error_body(401, "missing or wrong bearer key"));
    return false;
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    try {
      const CompletionRequest request = parse_completion_request(req.body, options.max_tokens);
      int64_t prompt_tokens = 0;
      for (const std::string& p : request.prompts) {
        prompt_tokens += static_cast<int64_t>(tokenizer.encode(p).size());
      }
      std::vector<Completion> out;
      {
        const std::lock_guard<std::mutex> lock(generate);
        Generator generator(model, tokenizer, request.options);
        out = generator.run(request.prompts);
      }
      const std::string id = fmt::format("cmpl-{}", ++requests);
      reply_json(res, 200,
                 completion_response(request, out, prompt_tokens, id, options.model_name,
                                     static_cast<int64_t>(std::time(nullptr))));
    } catch (const RequestError& e) {
      reply_json(res, e.status(), error_body(e.status(), e.what()));
    } catch (const ConfigError& e) {
      reply_json(res, 400, error_body(400, e.what()));
    }
  }
};

CompletionServer::CompletionServer(Gpt& model, const Tokenizer& tokenizer, ServeOptions options)
    : impl_(std::make_unique<Impl>(model, tokenizer, std::move(options))) {
  validate(impl_->options);
  if (sodium_init() < 0) throw Error("libsodium could not be initialised");
  httplib::Server& http = impl_->http;
  http.set_payload_max_length(kMaxRequestBytes);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  Impl* impl = impl_.get();
  http.Post("/v1/completions", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->completions(req, res);
  });
  http.Get("/v1/models", [impl](const httplib::Request& req, httplib::Response& res) {
    if (!impl->authorized(req, res)) return;
    reply_json(
        res, 200,
        {{"object", "list"},
         {"data",
          {{{"id", impl->options.model_name}, {"object", "model"}, {"owned_by", "brigade"}}}}});
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, 200, {{"status", "ok"}});
  });
  // What httplib itself refuses (a body over the cap: 413; an unknown path: 404) gets a JSON
  // body too.
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) reply_json(res, res.status, error_body(res.status, "request refused"));
  });
}

CompletionServer::~CompletionServer() {
  stop();
}

void CompletionServer::serve(const std::function<void(int)>& on_listening,
                             const std::function<bool()>& should_stop) {
  httplib::Server& http = impl_->http;
  const ServeOptions& o = impl_->options;
  const int port = o.port == 0 ? http.bind_to_any_port(o.host)
                               : (http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw IoError(fmt::format("cannot listen on {}:{}", o.host, o.port));
  if (on_listening) on_listening(port);
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done.load()) {
      if (should_stop && should_stop()) {
        http.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  http.listen_after_bind();
  done = true;
  watch.join();
}

void CompletionServer::stop() {
  impl_->http.stop();
}

}  // namespace brigade
