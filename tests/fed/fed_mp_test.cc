// Federated learning end to end through `brigade launch` (sync.method = "fed"): rank 0
// coordinates, ranks 1..N are clients, each on its own folder.
//
//   FedAvg with every client every round, one local SGD step over equal local data sets, equals
//   DDP-SGD of the same global batch (one process here: the gradient of all clients' examples as
//   one batch), within 1e-5 relative, over 3 rounds.
//   FedProx with mu = 0 equals FedAvg bitwise (and mu > 0 does not).
//   SCAFFOLD's global model and control variate match a naive reference over 3 rounds, and c
//   stays the mean of the clients' c_i when a client's answer comes after the deadline.
//   A client killed during the run: the rounds go on without it, every other client answers
//   every round, the job ends with exit code 0; with --max-restarts the launcher starts it
//   again and it rejoins.
//   A coordinator stopped after 2 of 4 rounds and started again ends bitwise where an
//   uninterrupted run ends (SCAFFOLD, so the clients' control variates resume too).
//   Data isolation: traced with strace, the coordinator opens no client folder and each client
//   only its own.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "brigade/fed/state_file.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "fed/fed_test_util.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

using Federation = testing::TinyFederation;

TEST_F(Federation, FedAvgWithOneLocalStepEqualsDdpSgdOfTheGlobalBatch) {
  run("fedavg", "");
  const std::vector<ImageSet> sets = client_sets();
  auto model = testing::tiny_model(kClients * testing::kTinyExamples);
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> g = testing::batch_gradient(*model, sets);
    for (int64_t i = 0; i < model->num_params(); ++i) model->params()[i] -= kLr * g[i];
  }
  const std::vector<float> want(model->params(), model->params() + model->num_params());
  const StateFile state = coordinator_state("fedavg");
  const std::vector<float>& got = state.tensor("params", model->num_params(), "coordinator");
  EXPECT_LT(testing::relative_error(got, want), 1e-5);
  EXPECT_EQ(state.int_or("next_round", -1), 3);
  // Every round asked and heard every client, and evaluated the test set.
  const auto rounds = testing::metrics_records(dir_ + "/fedavg/fed/metrics.jsonl", "round");
  ASSERT_EQ(rounds.size(), 3u);
  for (const auto& r : rounds) {
    EXPECT_EQ(r["participants"], nlohmann::json({0, 1, 2}));
    EXPECT_GT(r["bytes_down"].get<int64_t>(), 3 * 4 * model->num_params());
    EXPECT_GT(r["bytes_up"].get<int64_t>(), 3 * 4 * model->num_params());
    EXPECT_TRUE(r.contains("test_accuracy"));
  }
}

TEST_F(Federation, FedProxWithMuZeroEqualsFedAvg) {
  run("avg", "local_steps = 3\n");
  run("prox0", "local_steps = 3\nstrategy = \"fedprox\"\nmu = 0.0\n");
  run("prox1", "local_steps = 3\nstrategy = \"fedprox\"\nmu = 1.0\n");
  const int64_t n = testing::tiny_model(1)->num_params();
  const auto avg = coordinator_state("avg").tensor("params", n, "avg");
  EXPECT_EQ(coordinator_state("prox0").tensor("params", n, "prox0"), avg);
  EXPECT_NE(coordinator_state("prox1").tensor("params", n, "prox1"), avg);
}

TEST_F(Federation, ScaffoldMatchesANaiveReference) {
  constexpr int kLocalSteps = 2;
  run("scaffold", "local_steps = 2\nstrategy = \"scaffold\"\n");
  const std::vector<ImageSet> sets = client_sets();
  auto model = testing::tiny_model(testing::kTinyExamples);
  const auto n = static_cast<size_t>(model->num_params());
  std::vector<float> x(model->params(), model->params() + n), c(n, 0.0f);
  std::vector<std::vector<float>> ci(kClients, std::vector<float>(n, 0.0f));
  for (int round = 0; round < 3; ++round) {
    std::vector<double> mean_dy(n, 0.0), sum_dc(n, 0.0);
    for (int k = 0; k < kClients; ++k) {
      std::copy(x.begin(), x.end(), model->params());
      for (int s = 0; s < kLocalSteps; ++s) {
        const std::vector<float> g = testing::batch_gradient(*model, {sets[k]});
        for (size_t i = 0; i < n; ++i) model->params()[i] -= kLr * (g[i] + c[i] - ci[k][i]);
      }
      for (size_t i = 0; i < n; ++i) {
        const double y = model->params()[i];
        const double next = ci[k][i] - c[i] + (x[i] - y) / (kLocalSteps * kLr);
        mean_dy[i] += (y - x[i]) / kClients;
        sum_dc[i] += next - ci[k][i];
        ci[k][i] = static_cast<float>(next);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(x[i] + mean_dy[i]);
      c[i] = static_cast<float>(c[i] + sum_dc[i] / kClients);
    }
  }
  const StateFile state = coordinator_state("scaffold");
  EXPECT_LT(testing::relative_error(state.tensor("params", n, "scaffold"), x), 1e-5);
  EXPECT_LT(testing::relative_error(state.tensor("control", n, "scaffold"), c), 1e-4);
  for (int k = 0; k < kClients; ++k) {
    const StateFile client =
        read_state_file(dir_ + "/scaffold/fed/fed/client_" + std::to_string(k) + ".state");
    EXPECT_LT(testing::relative_error(client.tensor("control", n, "client"), ci[k]), 1e-4) << k;
  }
}

// Client 2 answers round 2 after its deadline (test hook BRIGADE_FAULT_FED_LATE): the round is
// aggregated without it, its late answer is refused, and before its next round it takes back
// the c_i step of the round that did not count. So the global c stays the mean of the clients'
// c_i, SCAFFOLD's invariant (without the take-back c_2 is one control step ahead of c).
TEST_F(Federation, AScaffoldClientWhoseAnswerCameLateTakesBackItsControlStep) {
  const std::string cmd =
      "env BRIGADE_FAULT_FED_LATE=2:2:2 " +
      command("late",
              "rounds = 4\nlocal_steps = 2\nstrategy = \"scaffold\"\nmin_clients = 2\n"
              "round_deadline_s = 1.5\neval_every = 0\n");
  const auto r = run_command(cmd, 240);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  const auto rounds = testing::metrics_records(dir_ + "/late/fed/metrics.jsonl", "round");
  ASSERT_EQ(rounds.size(), 4u);
  EXPECT_EQ(rounds[1]["participants"], nlohmann::json({0, 1})) << "client 2 was not late";
  EXPECT_EQ(rounds[3]["participants"], nlohmann::json({0, 1, 2}));
  EXPECT_GE(rounds[3]["refused"].get<int64_t>(), 1);

  const auto n = static_cast<int64_t>(testing::tiny_model(1)->num_params());
  const std::vector<float> c = coordinator_state("late").tensor("control", n, "coordinator");
  std::vector<float> mean(static_cast<size_t>(n), 0.0f);
  for (int k = 0; k < kClients; ++k) {
    const StateFile client =
        read_state_file(dir_ + "/late/fed/fed/client_" + std::to_string(k) + ".state");
    const std::vector<float>& ci = client.tensor("control", n, "client");
    for (int64_t i = 0; i < n; ++i)
      mean[static_cast<size_t>(i)] += ci[static_cast<size_t>(i)] / kClients;
  }
  EXPECT_LT(testing::relative_error(c, mean), 1e-5);
}

// The pid of the worker of rank `rank` of the launch with run id `run_id`, or -1.
pid_t worker_pid(const std::string& run_id, int rank) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string rank_entry = std::string("\0RANK=", 6) + std::to_string(rank) + '\0';
    if (env.find("BRIGADE_RUN_ID=" + run_id + '\0') != std::string::npos &&
        env.find(rank_entry) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// Runs a federation of `rounds` rounds of `local_steps` steps in which client 1 (rank 2) is
// killed once the first round is in the metrics (during the second round or later: the test
// does not depend on when); returns the launcher's output and the round records. The deadline
// is far above a round's time, also on a loaded machine.
std::pair<std::string, std::vector<nlohmann::json>> run_with_a_killed_client(
    Federation& f, const std::string& name, int rounds, int local_steps,
    const std::string& launch_extra) {
  const std::string run_id = name + "-" + std::to_string(::getpid());
  const std::string out_path = f.dir() + "/" + name + ".out";
  const std::string cmd = f.command(name,
                                    "rounds = " + std::to_string(rounds) +
                                        "\nlocal_steps = " + std::to_string(local_steps) +
                                        "\nround_deadline_s = 10\neval_every = 0\n",
                                    "--run-id " + run_id + " " + launch_extra) +
                          " > " + out_path + " 2>&1";
  const std::string metrics = f.dir() + "/" + name + "/fed/metrics.jsonl";
  std::thread killer([&] {
    for (int i = 0; i < 600; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!std::filesystem::exists(metrics) || testing::metrics_records(metrics, "round").empty()) {
        continue;
      }
      const pid_t pid = worker_pid(run_id, 2);
      if (pid > 0) ::kill(pid, SIGKILL);
      return;
    }
  });
  const auto r = run_command(cmd, 240);
  killer.join();
  std::ifstream out_file(out_path);
  std::string out((std::istreambuf_iterator<char>(out_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(r.exit_code, 0) << out;
  return {out, testing::metrics_records(metrics, "round")};
}

// The rounds (1-based) that client 1 took part in.
std::vector<int> rounds_with_client_1(const std::vector<nlohmann::json>& rounds) {
  std::vector<int> out;
  for (size_t i = 0; i < rounds.size(); ++i) {
    for (const auto& c : rounds[i]["participants"]) {
      if (c.get<int>() == 1) out.push_back(static_cast<int>(i) + 1);
    }
  }
  return out;
}

TEST_F(Federation, AKilledClientLeavesTheRoundsToTheOthers) {
  const auto [out, rounds] = run_with_a_killed_client(*this, "kill", 4, 2000, "");
  EXPECT_NE(out.find("rank 2 was killed by SIGKILL; it leaves the job"), std::string::npos) << out;
  ASSERT_EQ(rounds.size(), 4u) << out;
  // Clients 0 and 2 answer every round; client 1 the first ones only, not the last.
  for (const auto& r : rounds) {
    std::set<int> p;
    for (const auto& c : r["participants"]) p.insert(c.get<int>());
    EXPECT_TRUE(p.count(0) && p.count(2)) << r.dump();
  }
  const std::vector<int> with_1 = rounds_with_client_1(rounds);
  ASSERT_FALSE(with_1.empty());
  EXPECT_EQ(with_1.front(), 1);
  EXPECT_EQ(with_1.back(), static_cast<int>(with_1.size())) << "client 1 came back";
  EXPECT_LT(with_1.back(), 4) << out;
}

// With --max-restarts the launcher starts the killed client again, alone; it rejoins with a new
// key (and its saved state) and is asked again in a later round.
TEST_F(Federation, AKilledClientIsRestartedAndRejoins) {
  const auto [out, rounds] =
      run_with_a_killed_client(*this, "rejoin", 16, 4000, "--max-restarts 1");
  EXPECT_NE(out.find("rank 2 was killed by SIGKILL; the other 3 process(es) go on and it starts "
                     "again (restart 1 of 1)"),
            std::string::npos)
      << out;
  ASSERT_EQ(rounds.size(), 16u) << out;
  const std::vector<int> with_1 = rounds_with_client_1(rounds);
  ASSERT_FALSE(with_1.empty());
  EXPECT_EQ(with_1.front(), 1);
  EXPECT_LT(static_cast<int>(with_1.size()), 16) << "a round without client 1";
  EXPECT_EQ(with_1.back(), 16) << "client 1 is back by the last round\n" << out;
}

TEST_F(Federation, StopAndResumeEqualsAnUninterruptedRun) {
  const std::string fed =
      "rounds = 4\nlocal_steps = 2\nstrategy = \"scaffold\"\n"
      "server_optimizer = \"adam\"\nserver_lr = 0.03\n";
  run("whole", fed);
  run("parts", fed, " --set run.stop_after=2");
  EXPECT_EQ(coordinator_state("parts").int_or("next_round", -1), 2);
  run("parts", fed);
  const StateFile whole = coordinator_state("whole"), parts = coordinator_state("parts");
  EXPECT_EQ(parts.int_or("next_round", -1), 4);
  EXPECT_EQ(parts.tensors, whole.tensors);
  for (int k = 0; k < kClients; ++k) {
    const std::string file = "/fed/fed/client_" + std::to_string(k) + ".state";
    EXPECT_EQ(read_state_file(dir_ + "/parts" + file).tensors,
              read_state_file(dir_ + "/whole" + file).tensors)
        << k;
  }
}

TEST_F(Federation, EachProcessOpensOnlyItsOwnData) {
  if (std::system("command -v strace > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "strace is not installed (scripts/install-deps.sh installs it)";
  }
  const std::string trace = dir_ + "/opens";
  // LeakSanitizer cannot run under ptrace: a sanitizer build traces without it.
  const std::string cmd = "env ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=open,openat -o " +
                          trace + " " + command("iso", "") + " > " + dir_ + "/iso.out 2>&1";
  const auto r = run_command(cmd, 240);
  ASSERT_EQ(r.exit_code, 0) << cmd;
  // pid -> the data paths it opened, and which role it is (by the log it opened).
  std::map<std::string, std::set<std::string>> data_of;
  std::map<std::string, std::string> role_of;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const std::string pid = line.substr(0, line.find(' '));
    const size_t q = line.find('"');
    if (q == std::string::npos) continue;
    const std::string path = line.substr(q + 1, line.find('"', q + 1) - q - 1);
    if (path.find("/fed/train.log") != std::string::npos) role_of[pid] = "coordinator";
    const size_t rank_log = path.find("/logs/rank_");
    if (rank_log != std::string::npos) {
      role_of[pid] = "client_" + std::to_string(std::stoi(path.substr(rank_log + 11)) - 1);
    }
    if (path.rfind(dir_ + "/data/", 0) == 0) data_of[pid].insert(path);
  }
  int roles = 0;
  for (const auto& [pid, role] : role_of) {
    ++roles;
    const std::string own = role == "coordinator" ? dir_ + "/data/test" : dir_ + "/data/" + role;
    EXPECT_FALSE(data_of[pid].empty()) << role << " opened no data at all";
    for (const std::string& path : data_of[pid]) {
      EXPECT_EQ(path.rfind(own + "/", 0), 0u) << role << " opened " << path;
    }
  }
  EXPECT_EQ(roles, kClients + 1);
}

}  // namespace
}  // namespace brigade
