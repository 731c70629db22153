#pragma once
// A federated client: it connects to the coordinator (comm/curve_socket.h), says hello, and
// answers every kTrain with a round of local training on its own data (local_training.h) until
// the coordinator says stop. Its data folder is opened by this process alone. SCAFFOLD's control
// variate c_i is saved (fed/state_file.h) before each answer leaves, together with the one
// before it: a round that the coordinator retries or redoes after a restart trains from the
// c_i that round started with, so resumed runs stay bitwise.
#include <chrono>
#include <functional>
#include <string>

#include "brigade/comm/curve_socket.h"
#include "brigade/fed/attack.h"
#include "brigade/fed/fed_message.h"
#include "brigade/fed/local_training.h"
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

  ClientSetup setup_;
  LocalTrainer& trainer_;
  Model& model_;
  CurveClientLink& link_;
  std::function<bool()> finished_;
  Log& log_;
  int64_t n_ = 0;
  std::vector<float> control_, control_before_, delta_, control_delta_;
  int64_t control_round_ = -1;  // the round control_ was made in; -1: never trained
};

}  // namespace brigade
