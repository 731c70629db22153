// brigade serve end to end: a real server process on a loopback port, asked over HTTP by
// cpp-httplib's client. References: `brigade generate` on the same checkpoint (greedy
// completions, stop strings), the byte tokenizer's count (one token per prompt byte) for usage,
// and OpenAI's documented request and error shapes for what is refused.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

// `brigade serve` as a child process, bounded by `timeout`; stopped with SIGTERM.
class ServerProcess {
 public:
  ServerProcess(const std::string& args, const std::string& env, const std::string& log)
      : log_(log) {
    // --foreground: timeout passes our SIGTERM to the server once (not again to its group).
    const std::string cmd = env + " exec timeout --foreground -k 5 120 " +
                            std::string(BRIGADE_BINARY) + " serve " + args + " > " + log + " 2>&1";
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~ServerProcess() { stop(); }
  // The port it printed, or -1 once it exited or after 20 s.
  int wait_for_port() {
    for (int i = 0; i < 200; ++i) {
      std::ifstream in(log_);
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      const size_t at = text.find("127.0.0.1:");
      if (at != std::string::npos) return std::stoi(text.substr(at + 10));
      if (exit_code() >= 0) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  // The exit code once it has exited, else -1.
  int exit_code() {
    if (status_ < 0 && pid_ > 0) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    }
    return status_;
  }
  int stop() {
    if (pid_ > 0 && exit_code() < 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    pid_ = -1;
    return status_;
  }
  std::string log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

class ServeCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("serve-command");
    const std::string config = dir_ + "/gpt.toml";
    std::ofstream(config) << testing::tiny_gpt_config({{"train.steps", "30"}});
    const auto r = run_command(std::string(BRIGADE_BINARY) + " train " + config +
                                   " --set run.out_dir=" + dir_ + " --set run.name=gpt",
                               180);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static nlohmann::json post(httplib::Client& client, const nlohmann::json& body, int* status,
                             const httplib::Headers& headers = {}) {
    const auto res = client.Post("/v1/completions", headers, body.dump(), "application/json");
    if (!res) {
      *status = -1;
      return {};
    }
    *status = res->status;
    return nlohmann::json::parse(res->body);
  }
  static std::string dir_;
};
std::string ServeCommand::dir_;

TEST_F(ServeCommand, CompletionsEqualGenerateAndCountTokens) {
  ServerProcess server("--ckpt " + dir_ + "/gpt --port 0", "", dir_ + "/serve1.log");
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  const std::vector<std::string> prompts = {"The meaning of", "Why do birds", "A"};
  std::ofstream(dir_ + "/prompts.txt") << "The meaning of\nWhy do birds\nA\n";
  const auto gen =
      run_command(std::string(BRIGADE_BINARY) + " generate --ckpt " + dir_ + "/gpt --prompts " +
                      dir_ + "/prompts.txt --temperature 0 --tokens 24 --stop 'e ' 2>/dev/null",
                  60);
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  std::vector<nlohmann::json> want;
  std::istringstream lines(gen.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("{")) want.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(want.size(), 3u);

  int status = 0;
  const nlohmann::json got =
      post(client, {{"prompt", prompts}, {"max_tokens", 24}, {"temperature", 0}, {"stop", "e "}},
           &status);
  ASSERT_EQ(status, 200) << got.dump();
  EXPECT_EQ(got.at("object"), "text_completion");
  EXPECT_EQ(got.at("model"), "gpt");
  ASSERT_EQ(got.at("choices").size(), 3u);
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < 3; ++i) {
    const auto& c = got.at("choices")[i];
    EXPECT_EQ(c.at("index"), i);
    EXPECT_EQ(c.at("text"), want[i].at("completion")) << i;
    EXPECT_EQ(c.at("finish_reason"), want[i].at("finish")) << i;
    completion_tokens += want[i].at("tokens").get<int64_t>();
  }
  const auto& usage = got.at("usage");
  EXPECT_EQ(usage.at("prompt_tokens"), 14 + 12 + 1);  // byte tokens: one per prompt byte
  EXPECT_EQ(usage.at("completion_tokens"), completion_tokens);
  EXPECT_EQ(usage.at("total_tokens"), 27 + completion_tokens);

  // echo puts the prompt in front; one string is one prompt.
  const nlohmann::json echo = post(client,
                                   {{"prompt", "Why do birds"},
                                    {"max_tokens", 24},
                                    {"temperature", 0},
                                    {"stop", {"e "}},
                                    {"echo", true}},
                                   &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(echo.at("choices")[0].at("text"),
            "Why do birds" + want[1].at("completion").get<std::string>());
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(nlohmann::json::parse(models->body).at("data")[0].at("id"), "gpt");
  EXPECT_EQ(server.stop(), 0) << server.log();  // SIGTERM: a clean stop
}

TEST_F(ServeCommand, RefusesBadRequestsWithOpenAiErrors) {
  ServerProcess server("--ckpt " + dir_ + "/gpt --port 0 --max-tokens 64", "",
                       dir_ + "/serve2.log");
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  httplib::Client client("127.0.0.1", port);
  int status = 0;
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"max_tokens", 4}}, "prompt"},
      {{{"prompt", 7}}, "prompt"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", 65}}, "max_tokens"},
      {{{"prompt", "x"}, {"temperature", -1}}, "temperature"},
      {{{"prompt", "x"}, {"n", 2}}, "n"},
      {{{"prompt", "x"}, {"stream", true}}, "stream"},
      {{{"prompt", "x"}, {"logprobs", 3}}, "logprobs"},
      {{{"prompt", "x"}, {"stop", {"a", "b", "c", "d", "e"}}}, "stop"},
  };
  for (const auto& [body, field] : bad) {
    const nlohmann::json r = post(client, body, &status);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_EQ(r.at("error").at("type"), "invalid_request_error") << body.dump();
    EXPECT_NE(r.at("error").at("message").get<std::string>().find(field), std::string::npos)
        << r.dump();
  }
  const auto not_json = client.Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  const auto huge = client.Post("/v1/completions", std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 413);
  const auto missing = client.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // Still serving after all of that.
  post(client, {{"prompt", "x"}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 200);
}

TEST_F(ServeCommand, AKeyGuardsEveryModelEndpoint) {
  const std::string key = "0123456789abcdef0123";
  ServerProcess server("--ckpt " + dir_ + "/gpt --port 0", "BRIGADE_SERVE_KEY=" + key,
                       dir_ + "/serve3.log");
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  EXPECT_EQ(server.log().find(key), std::string::npos) << "the key must not be logged";
  httplib::Client client("127.0.0.1", port);
  int status = 0;
  const nlohmann::json body = {{"prompt", "x"}, {"max_tokens", 2}};
  const nlohmann::json none = post(client, body, &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(none.at("error").at("type"), "authentication_error");
  post(client, body, &status, {{"Authorization", "Bearer " + key + "x"}});
  EXPECT_EQ(status, 401);
  post(client, body, &status, {{"Authorization", "Bearer " + key}});
  EXPECT_EQ(status, 200);
  EXPECT_EQ(client.Get("/v1/models")->status, 401);
}

TEST_F(ServeCommand, ReachableFromOtherMachinesOnlyWithAKey) {
  const auto open = run_command(
      std::string(BRIGADE_BINARY) + " serve --ckpt " + dir_ + "/gpt --host 0.0.0.0 --port 0", 30);
  EXPECT_EQ(open.exit_code, 2) << open.output;
  EXPECT_NE(open.output.find("needs a key"), std::string::npos) << open.output;
  const auto short_key = run_command("env BRIGADE_SERVE_KEY=abc " + std::string(BRIGADE_BINARY) +
                                         " serve --ckpt " + dir_ + "/gpt --port 0",
                                     30);
  EXPECT_EQ(short_key.exit_code, 2) << short_key.output;
}

}  // namespace
}  // namespace brigade
