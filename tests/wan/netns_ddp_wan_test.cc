// Slow-link emulation end to end (scripts/wan/run.sh, docs/slow-links.md): ranks in their own
// network namespaces, links shaped to 100 Mbit/s with tc.
//
//  * The shaped link measures within a band of the configured rate (bench_link_throughput,
//    a plain TCP stream between two namespaces).
//  * A 2-rank DDP job of a tiny GPT across the namespaces, meeting at rank 0's TCP store,
//    ends with the same per-step losses and bitwise the same weights as the same job over
//    loopback with `brigade launch --nproc 2` (the namespaces' run over TLS, which
//    comm.transport = "auto" picks off loopback); its gradients really crossed the shaped links
//    (the kernel's interface counters), and the rounds in its run summary follow the derived
//    formula for two ranks.
//
// Skips, saying why, only where the machine refuses network namespaces (not root, no
// CAP_NET_ADMIN). Every command is bounded by `timeout`.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_command.h"
#include "common/tiny_gpt_config.h"

namespace brigade {
namespace {

using testing::CommandResult;
using testing::run_command;

// The tiny GPT of both runs; its parameter count by the GPT-2 formula is below.
constexpr int64_t kVocab = 256, kSeq = 32, kWidth = 32, kLayers = 2, kSteps = 6;
const std::string kConfig = testing::tiny_gpt_config({{"run.seed", "7"},
                                                      {"train.steps", std::to_string(kSteps)},
                                                      {"train.lr", "1e-3"},
                                                      {"train.min_lr", "1e-4"},
                                                      {"train.eval_batches", "20"},
                                                      {"train.log_every", "1"}});

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string binary() {
  return env_or("BRIGADE_BINARY", BRIGADE_BINARY);
}
std::string script() {
  return env_or("BRIGADE_SOURCE_DIR", BRIGADE_SOURCE_DIR) + "/scripts/wan/run.sh";
}
// bench/CMakeLists.txt passes the tool's path when it builds it; else it sits in the build's
// bench/ folder beside the binary.
std::string link_tool() {
#ifdef BRIGADE_LINK_TOOL_PATH
  const std::string built = BRIGADE_LINK_TOOL_PATH;
#else
  const std::string built =
      std::filesystem::path(binary()).parent_path().string() + "/bench/bench_link_throughput";
#endif
  return env_or("BRIGADE_LINK_TOOL", built);
}

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

// Why this machine refuses network namespaces, or "" if it allows them.
std::string namespaces_refused() {
  if (::geteuid() != 0) return "network namespaces need root (CAP_NET_ADMIN); euid is not 0";
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "unshare(CLONE_NEWNET) is refused (no CAP_NET_ADMIN in this container)";
  }
  const std::string probe = "brigade-wan-probe-" + std::to_string(::getpid());
  CommandResult r = run_command("ip netns add " + probe + " && ip netns del " + probe, 20);
  if (r.exit_code != 0 && (r.output.find("Operation not permitted") != std::string::npos ||
                           r.output.find("Permission denied") != std::string::npos)) {
    return "ip netns add is refused: " + r.output;
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The per-step losses and the final summary of a run folder's metrics.jsonl.
struct Metrics {
  std::vector<double> losses;
  nlohmann::json summary;
};
Metrics read_metrics(const std::string& run_dir) {
  Metrics m;
  std::istringstream in(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("ms_per_step")) m.losses.push_back(j.at("loss").get<double>());
    if (j.value("final", false)) m.summary = j;
  }
  return m;
}

// The tensors of a safetensors file: header entries (without __metadata__) and the data bytes.
struct Tensors {
  nlohmann::json header;
  std::string data;
};
Tensors read_safetensors(const std::string& path) {
  Tensors t;
  const std::string bytes = read_file(path);
  if (bytes.size() < 8) return t;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  if (n > bytes.size() - 8) return t;
  t.header = nlohmann::json::parse(bytes.substr(8, n));
  t.header.erase("__metadata__");
  t.data = bytes.substr(8 + n);
  return t;
}

// "all_reduce: 13 calls, 26 rounds, sent ..." lines of the run summary, by kind.
struct KindCount {
  int64_t calls = 0, rounds = 0;
};
std::map<std::string, KindCount> comm_counts(const std::string& comm) {
  std::map<std::string, KindCount> out;
  static const std::regex line(R"(([a-z_]+): (\d+) calls, (\d+) rounds)");
  for (auto it = std::sregex_iterator(comm.begin(), comm.end(), line); it != std::sregex_iterator();
       ++it) {
    out[(*it)[1]] = KindCount{std::stoll((*it)[2]), std::stoll((*it)[3])};
  }
  return out;
}

class WanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = namespaces_refused();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = testing::make_temp_dir("wan");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(WanTest, ShapedLinkMeasuresNearItsRate) {
  ASSERT_TRUE(std::filesystem::exists(link_tool()))
      << link_tool() << " is missing: build bench_link_throughput (BRIGADE_BENCH=ON) or set "
      << "BRIGADE_LINK_TOOL";
  // 12 MB at 100 Mbit/s: about a second on the wire.
  CommandResult r = run_command(script() + " --measure --nproc 2 --rate 100mbit --bytes 12000000" +
                                    " --tool " + quote(link_tool()),
                                60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(throughput_MBps=([0-9.]+))")))
      << r.output;
  const double mbps = std::stod(m[1]);
  // tbf counts whole frames: TCP/IP and Ethernet headers take ~4% of a 1514-byte frame, so
  // the payload rate sits just under 12.5 MB/s. The band allows some timer slack and a loaded
  // machine below, and the token bucket's initial burst above.
  const double shaped = 100e6 / 8 / 1e6;
  EXPECT_GE(mbps, 0.85 * shaped) << r.output;
  EXPECT_LE(mbps, 1.02 * shaped) << r.output;
  RecordProperty("throughput_MBps", std::to_string(mbps));
  std::printf("measured %.3f MB/s on a link shaped to %.3f MB/s\n", mbps, shaped);
}

TEST_F(WanTest, DdpAcrossNamespacesEqualsLoopback) {
  const std::string config = dir_ + "/tiny.toml";
  std::ofstream(config) << kConfig;
  // Reference: the same job over loopback, under brigade's own launcher.
  CommandResult loop = run_command(quote(binary()) + " launch --nproc 2 -- train " + quote(config) +
                                       " --set run.out_dir=" + quote(dir_ + "/loop"),
                                   120);
  ASSERT_EQ(loop.exit_code, 0) << loop.output;
  const std::string wan_run = dir_ + "/wan/tiny";
  CommandResult wan =
      run_command(script() + " --nproc 2 --rate 100mbit --timeout 100 --binary " + quote(binary()) +
                      " --run-dir " + quote(wan_run) + " -- train " + quote(config) +
                      " --set run.out_dir=" + quote(dir_ + "/wan"),
                  120);
  ASSERT_EQ(wan.exit_code, 0) << wan.output;
  // Off loopback the collectives go over TLS by default (comm.transport = "auto"); over loopback
  // they stay plain. The arithmetic is the same either way.
  EXPECT_NE(wan.output.find("collectives: TLS 1.3"), std::string::npos) << wan.output;
  EXPECT_NE(loop.output.find("collectives: plain TCP"), std::string::npos) << loop.output;

  // Same losses step by step, same weights bit for bit.
  Metrics ref = read_metrics(dir_ + "/loop/tiny");
  Metrics got = read_metrics(wan_run);
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(got.losses, ref.losses) << wan.output;
  EXPECT_EQ(got.summary.value("val_loss", -1.0), ref.summary.value("val_loss", -2.0));
  // The final checkpoint's shard (under DDP rank 0 writes the whole, replicated state).
  for (const char* shard : {"rank_00000.safetensors"}) {
    const std::string ckpt = std::string("/checkpoints/step_00000006/") + shard;
    Tensors a = read_safetensors(dir_ + "/loop/tiny" + ckpt);
    Tensors b = read_safetensors(wan_run + ckpt);
    ASSERT_FALSE(a.data.empty()) << "no tensors in " << dir_ << "/loop/tiny" << ckpt;
    EXPECT_EQ(a.header, b.header);
    EXPECT_TRUE(a.data == b.data) << "final state differs between loopback and namespaces";
  }

  // The gradients crossed the shaped links: each step's ring all-reduce of all gradients
  // sends T = 4 x params bytes per rank with two ranks (2(N-1)/N T). GPT-2 parameter count:
  // wte + wpe + per layer (2 layernorms, qkv, attention projection, MLP) + final layernorm.
  const int64_t C = kWidth;
  const int64_t params = kVocab * C + kSeq * C + kLayers * (12 * C * C + 13 * C) + 2 * C;
  for (int rank = 0; rank < 2; ++rank) {
    std::smatch m;
    const std::regex re("host " + std::to_string(rank) + R"( link bytes: tx=(\d+) rx=(\d+))");
    ASSERT_TRUE(std::regex_search(wan.output, m, re)) << wan.output;
    EXPECT_GE(std::stoll(m[1]), kSteps * 4 * params) << "rank " << rank << " sent too little";
    EXPECT_GE(std::stoll(m[2]), kSteps * 4 * params) << "rank " << rank << " received too little";
  }

  // Rounds in the run summary follow the formula for two ranks: every all_reduce here is
  // under 2N x 1 MiB, so 2(N-1) = 2 rounds; a broadcast ceil(log2 2) = 1.
  auto counts = comm_counts(got.summary.value("comm", std::string()));
  ASSERT_TRUE(counts.count("all_reduce")) << got.summary.dump();
  EXPECT_EQ(counts["all_reduce"].rounds, 2 * counts["all_reduce"].calls);
  if (counts.count("broadcast")) {
    EXPECT_EQ(counts["broadcast"].rounds, counts["broadcast"].calls);
  }
  // The script's model sums the per-step rounds of the metrics; every step has at least the
  // gradient all-reduce, 2(N-1) = 2 rounds.
  int64_t per_step_sum = 0;
  {
    std::istringstream in(read_file(wan_run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("ms_per_step")) per_step_sum += j.value("comm_rounds", int64_t{0});
    }
  }
  EXPECT_GE(per_step_sum, 2 * kSteps);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(wan.output, m,
                                std::regex(R"(latency model: (\d+) rounds over (\d+) steps)")))
      << wan.output;
  EXPECT_EQ(std::stoll(m[1]), per_step_sum);
  EXPECT_EQ(std::stoll(m[2]), kSteps);
}

}  // namespace
}  // namespace brigade
