// Trust in a federation, end to end through `brigade launch` (docs/security.md):
//
//   Robust aggregation: on Fashion-MNIST split over 7 clients, 2 of which send Gaussian noise
//   instead of their update, plain FedAvg collapses while the median, the trimmed mean and
//   Multi-Krum end within 2 points of the clean run, and Krum within 2 points of its own. A NaN
//   update is refused and the round goes on with the others without waiting for its deadline.
//   DP-FedAvg: without noise and with a clip no update reaches, it equals FedAvg of clients of
//   equal size; a clip every update exceeds bounds each round's step; with noise, the epsilon
//   of every round and of the summary is the Gaussian mechanism's, minimised over orders by an
//   independent grid search here. The coordinator's state, which holds the noise key, is 0600
//   and the key appears in no log.
//   Secure aggregation: the unmasked mean equals FedAvg of clients of equal size; a client that
//   drops after sharing its keys leaves a round of the others, and a round with fewer survivors
//   than the threshold is refused and retried, never wrongly unmasked.
//   Long-term keys (`brigade keygen`): clients with their listed keys train; a client holding
//   another key is refused and the others go on; clients that pin another coordinator key do
//   not connect; no secret key reaches a log.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/base/file_io.h"
#include "brigade/comm/key_file.h"
#include "brigade/fed/state_file.h"
#include "common/metrics_records.h"
#include "common/run_command.h"
#include "fed/fed_test_util.h"

namespace brigade {
namespace {

using testing::make_temp_dir;
using testing::run_command;

// Fashion-MNIST (the Debian package) split IID over 7 clients once for the suite.
class AttackedFederation : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    root_ = new std::string(make_temp_dir("fed-attack"));
    const auto r = run_command(std::string(BRIGADE_BINARY) +
                                   " partition --data fashion_mnist --clients 7 --scheme iid "
                                   "--seed 1 --out " +
                                   *root_ + "/part",
                               120);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete root_;
    root_ = nullptr;
  }

  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh)";
    }
  }

  // Runs 10 rounds of 20 local steps with `sets` and returns the summary record.
  nlohmann::json run(const std::string& name, const std::string& sets) {
    const std::string config = *root_ + "/" + name + ".toml";
    std::ofstream(config) << "[run]\nname = \"att\"\nseed = 3\n"
                             "[model]\nkind = \"mlp\"\nhidden = [32]\n"
                             "[data]\nsource = \"fashion_mnist\"\n"
                             "path = \"/usr/share/datasets/fashion-mnist\"\n"
                             "[train]\noptimizer = \"sgd\"\nlr = 0.05\nmomentum = 0.0\n"
                             "weight_decay = 0.0\nmicro_batch = 32\n"
                             "[sync]\nmethod = \"fed\"\n[comm]\ntimeout_s = 60\n"
                             "[fed]\nrounds = 10\nlocal_steps = 20\nmin_clients = 7\n"
                             "eval_every = 0\nround_deadline_s = 60\nclient_data = \""
                          << *root_ << "/part/client_{client}\"\n";
    const std::string cmd = std::string(BRIGADE_BINARY) + " launch --nproc 8 -- train " + config +
                            " --set run.out_dir=" + *root_ + "/" + name + sets;
    const auto r = run_command(cmd, 300);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    const auto summary =
        testing::metrics_records(*root_ + "/" + name + "/att/metrics.jsonl", "summary");
    if (summary.empty()) return nlohmann::json::object({{"test_accuracy", 0.0}});
    return summary.back();
  }

  std::vector<nlohmann::json> rounds(const std::string& name) {
    return testing::metrics_records(*root_ + "/" + name + "/att/metrics.jsonl", "round");
  }

  static std::string* root_;
};

std::string* AttackedFederation::root_ = nullptr;

TEST_F(AttackedFederation, RobustRulesHoldOffNoiseThatBreaksFedAvg) {
  const std::string attack = " --set fed.attack=noise --set fed.attackers=2";
  const double clean = run("clean", "")["test_accuracy"];
  ASSERT_GT(clean, 0.7);
  const double broken = run("mean", attack)["test_accuracy"];
  EXPECT_LT(broken, clean - 0.2) << "the attack does not hurt FedAvg: the test shows nothing";
  for (const auto& [name, sets] : std::vector<std::pair<std::string, std::string>>{
           {"median", " --set fed.aggregator=median"},
           {"trimmed", " --set fed.aggregator=trimmed_mean --set fed.trim_fraction=0.3"},
           {"multikrum", " --set fed.aggregator=multi_krum --set fed.byzantine=2"}}) {
    const double accuracy = run(name, attack + sets)["test_accuracy"];
    EXPECT_GT(accuracy, clean - 0.02) << name << " (clean " << clean << ")";
  }
  // Krum steps with one client's update, which costs accuracy even without an attack (Blanchard
  // et al. 2017): under attack it stays within 2 points of its own clean run.
  const std::string krum = " --set fed.aggregator=krum --set fed.byzantine=2";
  const double krum_clean = run("krum-clean", krum)["test_accuracy"];
  EXPECT_GT(krum_clean, clean - 0.05);
  EXPECT_GT(run("krum", attack + krum)["test_accuracy"].get<double>(), krum_clean - 0.02);
  // Krum and Multi-Krum never chose an attacker (clients 0 and 1).
  for (const std::string name : {"krum", "multikrum"}) {
    for (const auto& r : rounds(name)) {
      for (const auto& c : r["selected"]) EXPECT_GE(c.get<int>(), 2) << name << " " << r.dump();
    }
  }
}

TEST_F(AttackedFederation, ANanUpdateIsRefusedAndTheRoundGoesOnWithoutWaiting) {
  const auto summary = run("nan",
                           " --set 'fed.attack=\"nan\"' --set fed.attackers=2 "
                           "--set fed.min_clients=5 --set fed.rounds=3");
  EXPECT_GT(summary["test_accuracy"].get<double>(), 0.6);
  const auto records = rounds("nan");
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) {
    EXPECT_EQ(r["answered"], 5);
    EXPECT_EQ(r["participants"], nlohmann::json({2, 3, 4, 5, 6}));
    EXPECT_LT(r["round_s"].get<double>(), 30.0) << "the round waited for the refused clients";
  }
  EXPECT_GE(records.back()["refused"].get<int>(), 6);
}

using TinyFed = testing::TinyFederation;

TEST_F(TinyFed, DpFedAvgWithoutNoiseAndAnUnreachedClipEqualsFedAvg) {
  run("avg", "local_steps = 3\n");
  run("dp", "local_steps = 3\ndp_clip = 1e9\ndp_noise = 0.0\n");
  const auto avg = global_params("avg");
  const auto dp = global_params("dp");
  EXPECT_LT(testing::relative_error(dp, avg), 1e-6);
}

TEST_F(TinyFed, DpClipBoundsEveryRoundsStep) {
  constexpr double kClip = 0.01;
  run("clip", "rounds = 1\nlocal_steps = 3\ndp_clip = 0.01\n");
  auto model = testing::tiny_model(1);
  const int64_t n = model->num_params();
  const auto after = global_params("clip");
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(after[i]) - model->params()[i];
    squares += d * d;
  }
  // Each of the 3 updates is far longer than the clip: the mean of 3 clipped ones.
  EXPECT_LE(std::sqrt(squares), kClip * (1 + 1e-5));
  EXPECT_GT(std::sqrt(squares), kClip / 2);
  const auto r = testing::metrics_records(dir_ + "/clip/fed/metrics.jsonl", "round");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["dp_clipped"], 3);
}

// The epsilon of `rounds` Gaussian mechanisms of multiplier z (every client every round):
// T alpha / (2 z^2) converted as Canonne, Kamath and Steinke (2020), minimised over a fine grid.
double gaussian_epsilon(double z, int rounds, double delta) {
  double best = INFINITY;
  for (double a = 1.02; a < 2000; a *= 1.0005) {
    const double rdp = rounds * a / (2 * z * z);
    best = std::min(best, rdp + std::log1p(-1 / a) - (std::log(delta) + std::log(a)) / (a - 1));
  }
  return best;
}

TEST_F(TinyFed, DpFedAvgReportsTheEpsilonOfItsNoiseAndKeepsItsKeySecret) {
  run("noised", "rounds = 3\ndp_clip = 0.5\ndp_noise = 1.2\ndp_delta = 1e-4\n");
  const auto records = testing::metrics_records(dir_ + "/noised/fed/metrics.jsonl", "round");
  ASSERT_EQ(records.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const double want = gaussian_epsilon(1.2, r + 1, 1e-4);
    const double got = records[r]["dp_epsilon"];
    EXPECT_GE(got, want * (1 - 1e-9)) << "round " << r + 1;  // the grid here is finer
    EXPECT_LT(got, want * 1.02) << "round " << r + 1;
    EXPECT_EQ(records[r]["participants"], nlohmann::json({0, 1, 2}));  // q = 1: everyone
  }
  const auto summary = testing::metrics_records(dir_ + "/noised/fed/metrics.jsonl", "summary");
  ASSERT_FALSE(summary.empty());
  EXPECT_DOUBLE_EQ(summary.back()["dp_epsilon"].get<double>(),
                   records.back()["dp_epsilon"].get<double>());

  const std::string state_path = dir_ + "/noised/fed/fed/coordinator.state";
  struct stat st {};
  ASSERT_EQ(::stat(state_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const StateFile state = read_state_file(state_path);
  std::string logs;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/noised")) {
    if (e.path().extension() == ".log" || e.path().extension() == ".jsonl") {
      std::ifstream f(e.path());
      logs += std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    }
  }
  for (int w = 0; w < 4; ++w) {
    const int64_t word = state.int_or("dp_key_" + std::to_string(w), 0);
    ASSERT_NE(word, 0);
    EXPECT_EQ(logs.find(std::to_string(word)), std::string::npos) << "the DP key is in a log";
  }
}

// FedAvg of one local SGD step per client over `participants[r]` in round r, from the tiny
// model's initial parameters: the reference a secure federation must reach.
std::vector<float> fedavg_reference(const std::vector<ImageSet>& sets,
                                    const std::vector<std::vector<int>>& participants) {
  auto model = testing::tiny_model(testing::kTinyExamples);
  const auto n = static_cast<size_t>(model->num_params());
  std::vector<float> x(model->params(), model->params() + n);
  for (const std::vector<int>& round : participants) {
    std::vector<double> mean(n, 0.0);
    for (int k : round) {
      std::copy(x.begin(), x.end(), model->params());
      const std::vector<float> g = testing::batch_gradient(*model, {sets[k]});
      for (size_t i = 0; i < n; ++i) mean[i] -= TinyFed::kLr * g[i] / double(round.size());
    }
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] + mean[i]);
  }
  return x;
}

TEST_F(TinyFed, SecureAggregationEqualsFedAvg) {
  run("secure", "secure_aggregation = true\nmin_clients = 2\n");
  const auto got = global_params("secure");
  EXPECT_LT(testing::relative_error(
                got, fedavg_reference(client_sets(), {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}})),
            1e-5);
  for (const auto& r : testing::metrics_records(dir_ + "/secure/fed/metrics.jsonl", "round")) {
    EXPECT_EQ(r["aggregator"], "secure_mean");
    EXPECT_EQ(r["participants"], nlohmann::json({0, 1, 2}));
  }
}

// Secure aggregation under DP-FedAvg: the clients clip and add their shares of the noise.
// Without noise and with a clip no update reaches it is FedAvg again; with noise the
// rounds report the epsilon of the Gaussian mechanism.
TEST_F(TinyFed, SecureAggregationWithDpEqualsFedAvgWithoutNoise) {
  run("securedp", "secure_aggregation = true\nmin_clients = 2\ndp_clip = 1e9\n");
  const auto got = global_params("securedp");
  EXPECT_LT(testing::relative_error(
                got, fedavg_reference(client_sets(), {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}})),
            1e-5);
  run("securenoised",
      "secure_aggregation = true\nmin_clients = 2\ndp_clip = 0.5\n"
      "dp_noise = 1.2\ndp_delta = 1e-4\nsecagg_clip = 2.0\n");
  const auto records = testing::metrics_records(dir_ + "/securenoised/fed/metrics.jsonl", "round");
  ASSERT_EQ(records.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(records[r]["aggregator"], "secure_dp_sum");
    EXPECT_LT(records[r]["dp_epsilon"].get<double>(), gaussian_epsilon(1.2, r + 1, 1e-4) * 1.02);
  }
}

// The standard deviation of the step of one round from the tiny model's initial parameters.
double step_deviation(const std::vector<float>& after) {
  auto model = testing::tiny_model(1);
  double sum = 0, squares = 0;
  const int64_t n = model->num_params();
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(after[i]) - model->params()[i];
    sum += d;
    squares += d * d;
  }
  return std::sqrt(squares / n - (sum / n) * (sum / n));
}

// With a clip far below the updates' norms the step is almost all noise: centrally it has the
// standard deviation z C / (q N); distributed under secure aggregation, 3 survivors of a round
// with threshold 2 each add (z C)^2 / 2, so sqrt(3 / 2) times that.
TEST_F(TinyFed, DistributedNoiseUnderSecureAggregationHasTheStatedDeviation) {
  const std::string dp = "rounds = 1\nmin_clients = 2\ndp_clip = 0.01\ndp_noise = 1.0\n";
  run("central", dp);
  run("distributed", dp + "secure_aggregation = true\n");
  const double central = step_deviation(global_params("central"));
  const double distributed = step_deviation(global_params("distributed"));
  const double z_c_over_qn = 1.0 * 0.01 / 3;
  // 12,730 values: the sample deviation is within 3% of the true one (5 standard errors).
  EXPECT_NEAR(central, z_c_over_qn, 0.03 * z_c_over_qn);
  EXPECT_NEAR(distributed, std::sqrt(1.5) * z_c_over_qn, 0.03 * std::sqrt(1.5) * z_c_over_qn);
}

// Client 1 shares its keys in round 2 and then sends no masked update: the survivors' sum
// must come out with its pairwise masks removed (rebuilt from the others' shares of its key).
TEST_F(TinyFed, SecureAggregationSurvivesAClientThatDropsAfterSharing) {
  const std::string cmd = "env BRIGADE_FAULT_SECAGG_SILENT=1:masked:2 " +
                          command("drop",
                                  "secure_aggregation = true\nmin_clients = 2\n"
                                  "secagg_step_s = 5\n");
  const auto r = run_command(cmd, 240);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  const auto got = global_params("drop");
  EXPECT_LT(
      testing::relative_error(got, fedavg_reference(client_sets(), {{0, 1, 2}, {0, 2}, {0, 1, 2}})),
      1e-5);
  const auto rounds = testing::metrics_records(dir_ + "/drop/fed/metrics.jsonl", "round");
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[1]["participants"], nlohmann::json({0, 2}));
  EXPECT_EQ(rounds[1]["attempts"], 1);
}

// Two of three drop after sharing: fewer survivors than the threshold (2), so that attempt is
// refused, not unmasked, and the retried attempt (everyone) makes the round.
TEST_F(TinyFed, SecureAggregationRefusesARoundBelowTheThresholdAndRetriesIt) {
  const std::string cmd = "env BRIGADE_FAULT_SECAGG_SILENT=1:masked:2,2:masked:2 " +
                          command("below",
                                  "secure_aggregation = true\nmin_clients = 2\n"
                                  "secagg_step_s = 5\n");
  const auto r = run_command(cmd, 240);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  EXPECT_NE(r.output.find("secure aggregation stopped at masking"), std::string::npos) << r.output;
  const auto got = global_params("below");
  EXPECT_LT(testing::relative_error(
                got, fedavg_reference(client_sets(), {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}})),
            1e-5);
  const auto rounds = testing::metrics_records(dir_ + "/below/fed/metrics.jsonl", "round");
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[1]["attempts"], 2);
}

// Long-term keys from `brigade keygen` for the coordinator and clients 0 .. 2 in dir/keys, and
// an intruder's pair; returns the [fed] lines that use them.
std::string make_keys(const std::string& dir) {
  for (const std::string name : {"coordinator", "client_0", "client_1", "client_2", "intruder"}) {
    const auto r =
        run_command(std::string(BRIGADE_BINARY) + " keygen --out " + dir + "/keys/" + name, 30);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(".pub"), std::string::npos) << r.output;
  }
  return "coordinator_key = \"" + dir + "/keys/coordinator.key\"\ncoordinator_public = \"" + dir +
         "/keys/coordinator.pub\"\nclient_key = \"" + dir +
         "/keys/client_{client}.key\"\nclient_public = \"" + dir +
         "/keys/client_{client}.pub\"\nmin_clients = 2\nround_retries = 0\n";
}

TEST_F(TinyFed, ClientsWithTheirListedKeysTrainAndAnIntruderIsRefused) {
  std::filesystem::create_directories(dir_ + "/keys");
  const std::string keys = make_keys(dir_);
  run("keyed", keys);
  auto records = testing::metrics_records(dir_ + "/keyed/fed/metrics.jsonl", "round");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records.back()["participants"], nlohmann::json({0, 1, 2}));

  // Client 2 now holds the intruder's key: not the one the coordinator lists for it.
  std::filesystem::rename(dir_ + "/keys/client_2.key", dir_ + "/keys/client_2.real");
  std::filesystem::copy_file(dir_ + "/keys/intruder.key", dir_ + "/keys/client_2.key");
  const std::string cmd = command("intruded", keys) + " --set comm.timeout_s=5";
  const auto r = run_command(cmd, 240);
  EXPECT_NE(r.output.find("refused client 2: it presents a key that is not its key"),
            std::string::npos)
      << r.output;
  records = testing::metrics_records(dir_ + "/intruded/fed/metrics.jsonl", "round");
  ASSERT_EQ(records.size(), 3u) << r.output;
  for (const auto& rec : records) EXPECT_EQ(rec["participants"], nlohmann::json({0, 1}));
  // No secret key reaches the output or a log.
  std::string logs = r.output;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/intruded")) {
    if (e.path().extension() == ".log") logs += read_file(e.path().string());
  }
  for (const std::string name : {"coordinator", "client_0", "client_1", "intruder"}) {
    const std::string secret =
        read_secret_key_file(dir_ + "/keys/" + name + ".key", "test").secret_key;
    EXPECT_EQ(logs.find(secret), std::string::npos) << name << "'s secret key is in a log";
  }
}

TEST_F(TinyFed, ClientsRefuseACoordinatorThatIsNotThePinnedOne) {
  std::filesystem::create_directories(dir_ + "/keys");
  const std::string keys = make_keys(dir_);
  // The clients pin the intruder's public key as the coordinator's.
  const std::string cmd = command("pinned", keys) + " --set comm.timeout_s=5" +
                          " --set fed.coordinator_public=" + dir_ + "/keys/intruder.pub";
  const auto r = run_command(cmd, 240);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("holds a key that is not the one in fed.coordinator_public"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(testing::metrics_records(dir_ + "/pinned/fed/metrics.jsonl", "round").empty());
}

}  // namespace
}  // namespace brigade
