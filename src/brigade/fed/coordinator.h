#pragma once
// The federated coordinator (McMahan et al. 2017, in Flower's shape): it holds the global model,
// the server optimizer and SCAFFOLD's global control variate, and never reads training data.
// Per round it samples clients among the connected ones (seeded by run seed, round and attempt),
// sends them the global model, collects the answers that arrive before fed.round_deadline_s,
// and aggregates them when at least fed.min_clients answered; otherwise it retries the round
// (fed.round_retries times, then stops with exit code 5). Every round's participants, durations
// and bytes, and the global model's test loss and accuracy, go to metrics.jsonl; its state is
// saved every fed.ckpt_every rounds (fed/state_file.h) and a restarted coordinator resumes from
// it bitwise.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "brigade/comm/curve_socket.h"
#include "brigade/data/loader.h"
#include "brigade/fed/dp_mechanism.h"
#include "brigade/fed/fed_aggregate.h"
#include "brigade/fed/fed_config.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/privacy_accountant.h"
#include "brigade/model/model.h"
#include "brigade/monitor/log.h"
#include "brigade/monitor/metrics.h"

namespace brigade {

struct CoordinatorSetup {
  FedConfig fed;
  int clients = 0;           // N: the clients of the federation, indices [0, N)
  uint64_t seed = 0;         // run.seed: initial model and client sampling
  uint64_t run_tag = 0;      // every message carries it
  int64_t stop_after = 0;    // rounds in this invocation; 0: to fed.rounds
  int64_t eval_batches = 0;  // batches of the test set per evaluation; 0: all of it
  bool classifier = true;    // accuracies are reported (a language model reports losses only)
  std::string state_path;    // where the coordinator's state lives
  bool resume = true;        // read state_path if it exists
  std::chrono::milliseconds join_timeout{60000};  // a round's wait for min_clients to connect
  // Checked after every round: true ends the invocation there, with the state saved (the first
  // SIGINT/SIGTERM).
  std::function<bool()> stop_requested = [] { return false; };
  // Called after each round whose state is saved (fed.ckpt_every, the last, an interrupted
  // one) with the rounds completed, while eval_model holds that round's global model: the
  // trainer saves it as a checkpoint of the common format there.
  std::function<void(int64_t rounds)> on_saved = nullptr;
};

// What a finished invocation leaves.
struct CoordinatorOutcome {
  int64_t rounds_done = 0;   // rounds completed in this invocation
  bool interrupted = false;  // stop_requested() ended it early
  int64_t next_round = 0;
  double test_loss = 0, test_accuracy = 0;  // of the last evaluation (accuracy: classifiers)
  double dp_epsilon = -1;  // fed.dp_clip > 0: the epsilon spent so far (+inf without noise)
};

class Coordinator {
 public:
  // eval_model: a model of the run's shape whose buffers hold evaluation batches; its parameters
  // are the global model. test (which must outlive the coordinator) is evaluated in batches of
  // eval_model.max_batch() examples. refresh_keys: admits keys of clients that published one
  // since.
  Coordinator(const CoordinatorSetup& setup, Model& eval_model, const Dataset& test,
              CurveServerSocket& socket, std::function<void()> refresh_keys, MetricsWriter& metrics,
              Log& log);

  CoordinatorOutcome run();
  const float* params() const { return model_.params(); }

 private:
  struct Answer {
    FedMessage message;
    double seconds = 0;  // from the request to the answer
  };
  void load_or_initialize();
  void save(int64_t next_round);
  // Waits until at least min_clients are connected (or the join timeout passes).
  void wait_for_clients(int64_t want);
  struct Incoming {
    int peer = -1;      // the client its connection's key belongs to
    int64_t bytes = 0;  // on the wire
    FedMessage message;
  };
  // Notes the connection a message came on and decodes it; a malformed one is refused (logged)
  // and gives nullopt, as does a message from an unnamed connection.
  std::optional<Incoming> decode_received(CurveServerSocket::Received&& r);
  // The next decoded message that is not a hello, waiting at most 500 ms and not past deadline.
  // When it gives nullopt because a client's message was malformed (refused, e.g. a non-finite
  // loss from a client whose training diverged), *refused_peer is that client; else -1.
  std::optional<Incoming> receive_before(std::chrono::steady_clock::time_point deadline,
                                         int* refused_peer = nullptr);
  // Handles one incoming message outside a round's collection (hellos, late answers).
  void note(CurveServerSocket::Received&& r);
  std::vector<int> sample(int64_t round, int64_t attempt) const;
  // One attempt of a round: returns the answers that may be aggregated.
  std::map<int, Answer> collect(int64_t round, int64_t attempt, const std::vector<int>& asked,
                                int64_t* bytes_down, int64_t* bytes_up);
  // Sends kTrain of (round, attempt) to the asked clients (threshold > 0: under secure
  // aggregation); returns those it reached. Clients that have gone leave connected_.
  std::set<int> send_train(int64_t round, int64_t attempt, const std::vector<int>& asked,
                           int64_t threshold, int64_t* bytes_down);
  // One attempt of a round under secure aggregation (coordinator_secagg.cc): the four steps of
  // fed/secagg/protocol.h. On success delta_ holds the sum of the survivors' updates and the
  // answers (their headers: samples, losses, durations) are theirs; otherwise it is empty.
  std::map<int, Answer> collect_secure(int64_t round, int64_t attempt,
                                       const std::vector<int>& asked, int64_t* bytes_down,
                                       int64_t* bytes_up);
  // Turns the answers into delta_ by fed.aggregator (or DP-FedAvg's noised mean) and applies
  // it; returns what the round's metrics record says about it.
  nlohmann::json aggregate(const std::map<int, Answer>& answers, int64_t round, int64_t attempt);
  // Composes the round into the accountant and writes (epsilon, delta) into record.
  void record_privacy(nlohmann::json& record);
  // The Poisson probability of DP-FedAvg's client sampling: clients_per_round / clients.
  double dp_sampling_probability() const;
  std::pair<double, double> evaluate();  // test loss, accuracy
  void stop_clients();
  void refuse(int peer, const std::string& why);

  CoordinatorSetup setup_;
  Model& model_;
  EvalIterator test_;
  CurveServerSocket& socket_;
  std::function<void()> refresh_keys_;
  MetricsWriter& metrics_;
  Log& log_;
  int64_t n_ = 0;
  bool scaffold_ = false;
  std::vector<float> control_;       // SCAFFOLD's c
  std::vector<int64_t> aggregated_;  // per client: the last round its update was aggregated
  std::vector<float> delta_;         // the round's mean update
  std::unique_ptr<ServerOptimizer> server_;
  std::vector<std::vector<float>> bounded_;  // fed.norm_bound: the round's updates, scaled
  DpKey dp_key_{};                           // fed.dp_clip > 0: the noise and sampling secret
  std::unique_ptr<DpMechanism> dp_;
  PrivacyAccountant accountant_;
  int64_t next_round_ = 0;
  std::map<int, zmq::message_t> connected_;  // client -> routing id of its connection
  int64_t refused_ = 0;
  Batch eval_batch_;
};

}  // namespace brigade
