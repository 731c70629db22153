#pragma once
// A federated client: it connects to the coordinator (comm/curve_socket.h), says hello, and
// answers every kTrain with a round of local training on its own data (local_training.h) until
// the coordinator says stop. Its data folder is opened by this process alone. SCAFFOLD's control
// variate c_i is saved (fed/state_file.h) before each answer leaves, together with the one
// before it: a round that the coordinator retries or redoes after a restart trains from the
// c_i that round started with, so resumed runs stay bitwise.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "brigade/comm/curve_socket.h"
#include "brigade/fed/attack.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/local_training.h"
#include "brigade/fed/secagg/secagg_client.h"
#include "brigade/monitor/log.h"

namespace brigade {

struct ClientSetup {
  int client = 0;
  uint64_t run_tag = 0;
  std::string state_path;  // where c_i lives (SCAFFOLD)
  // With no message from the coordinator for this long the client gives up (exit code 5).
  std::chrono::milliseconds idle_timeout{600000};
  // fed.attack, when this client is one of fed.attackers (tests and benchmarks only).
  AttackConfig attack;
  uint64_t seed = 0;  // run.seed: the attack's noise
  // Secure aggregation (fed/secagg/): the federation's size (the fixed point's max_clients),
  // each value's clip, and DP-FedAvg's L2 clip, applied here since no one else sees the update.
  int64_t federation_clients = 0;
  double secagg_clip = 1.0;
  double dp_clip = 0;
  bool classifier = true;  // the log reports local accuracy (a language model has none)
  double dp_noise = 0;     // z: under secure aggregation each client adds its share of the noise
};

class Client {
 public:
  // finished(): whether the job is over (the coordinator marked it so), checked while idle.
  Client(const ClientSetup& setup, LocalTrainer& trainer, Model& model, CurveClientLink& link,
         std::function<bool()> finished, Log& log);
  // Serves rounds until stopped; returns the rounds trained.
  int64_t run();

 private:
  void load_state();
  void answer(const FedMessage& train);
  // Secure aggregation (client_secagg.cc): advertises this round's keys, with the training's
  // figures in the header; then answers each step of the coordinator's until the round is done.
  void start_secure_round(const FedHeader& train, FedHeader stats);
  void step_secure_round(const FedMessage& step);
  void send_secure(const std::vector<uint8_t>& bytes);

  ClientSetup setup_;
  LocalTrainer& trainer_;
  Model& model_;
  CurveClientLink& link_;
  std::function<bool()> finished_;
  Log& log_;
  int64_t n_ = 0;
  std::vector<float> control_, control_before_, delta_, control_delta_;
  int64_t control_round_ = -1;  // the round control_ was made in; -1: never trained
  std::unique_ptr<secagg::SecAggClient> secure_;  // the secure round in progress, if any
  secagg::RoundId secure_id_;
  FedHeader secure_header_;  // the header of this client's steps in it
};

}  // namespace brigade
