#pragma once
// The [fed] section of a run's configuration (runtime/config.h holds the whole), here so that the
// federated roles read their settings without depending on the room above them.
#include <cstdint>
#include <string>

namespace brigade {

// sync.method = "fed": federated learning (fed/, docs/federated.md). Rank 0 is the coordinator
// (the global model and the server optimizer; reads only fed.test_data), every other rank a
// client that trains on its own folder, fed.client_data with "{client}" replaced by its index.
struct FedConfig {
  int64_t rounds = 50;
  int64_t clients_per_round = 0;    // sampled per round from the connected clients; 0: all of them
  int64_t min_clients = 1;          // fewest answers a round aggregates, else it is retried
  int64_t local_epochs = 1;         // passes over a client's data per round
  int64_t local_steps = 0;          // > 0: this many local SGD steps instead of local_epochs
  double round_deadline_s = 600;    // answers after this are dropped from the round
  int64_t round_retries = 3;        // attempts of a round beyond the first before the run stops
  std::string strategy = "fedavg";  // "fedavg" | "fedprox" | "scaffold"
  double mu = 0.01;                 // fedprox: proximal weight
  std::string server_optimizer = "avg";  // "avg" | "avgm" | "adam" | "yogi"
  double server_lr = 1.0;
  double server_momentum = 0.9;  // avgm
  double server_beta1 = 0.9;     // adam, yogi
  double server_beta2 = 0.99;    // adam, yogi
  double server_tau = 1e-3;      // adam, yogi: adaptivity (denominator guard)
  std::string client_data;       // a client's folder; "{client}" is replaced by its index
  std::string test_data;         // the coordinator's held-out set; "" = data.path's t10k split
  int64_t eval_every = 1;        // rounds between evaluations of the global model (0: at the end)
  int64_t ckpt_every = 1;        // rounds between coordinator checkpoints (0: at the end)
  std::string bind;              // the coordinator's address; empty: comm.host
  // Long-term identities (`brigade keygen`, comm/key_file.h). Empty: fresh keys per job,
  // exchanged through the job's store. "{client}" is replaced by the client's index.
  // `brigade fed-server` / `fed-client` (a federation started by hand): the number of clients,
  // and where the coordinator listens (host:port, its fed.bind). Under `brigade launch` the
  // clients are the job's ranks: clients stays 0 and coordinator "".
  int64_t clients = 0;
  std::string coordinator;
  std::string coordinator_key;     // the coordinator's NAME.key
  std::string coordinator_public;  // clients: NAME.pub the coordinator must hold (pinned)
  std::string client_key;          // a client's NAME.key
  std::string client_public;       // the coordinator's allow-list: client k's NAME.pub
  // Robust aggregation (optim/robust_aggregate.h, docs/security.md).
  std::string aggregator = "mean";  // "mean" | "median" | "trimmed_mean" | "krum" | "multi_krum"
  double trim_fraction = 0.1;  // trimmed_mean: share of values dropped at each end, per coordinate
  int64_t byzantine = 0;       // krum, multi_krum: f, the attackers tolerated (answers > 2f + 2)
  int64_t krum_select = 0;     // multi_krum: m, the updates averaged; 0: answers - f
  double norm_bound = 0;       // > 0: every update is scaled down to this L2 norm first
  // Differential privacy, DP-FedAvg (fed/dp_mechanism.h): clients sampled by Poisson with
  // q = clients_per_round / clients, updates clipped to dp_clip, the sum noised with standard
  // deviation dp_noise * dp_clip, (epsilon, dp_delta) reported after every round.
  double dp_clip = 0;   // > 0 turns DP-FedAvg on
  double dp_noise = 0;  // z, the noise multiplier
  double dp_delta = 1e-5;
  // Secure aggregation (fed/secagg/, Bonawitz et al. 2017): the coordinator learns only the sum
  // of the round's updates. Each update value is clipped to +-secagg_clip and summed in fixed
  // point; the mean is uniform over the clients that survive the round.
  bool secure_aggregation = false;
  double secagg_clip = 1.0;      // per value; updates beyond it are clipped (and counted)
  int64_t secagg_threshold = 0;  // t: survivors needed to unmask; 0: half the asked clients + 1
  double secagg_step_s = 30;     // deadline of each step after training (shares, masks, unmask)
  // Attack clients, for tests and benchmarks of the rules above (fed/attack.h): clients
  // 0 .. attackers - 1 send a corrupted update.
  std::string attack = "none";  // "none" | "sign_flip" | "scale" | "noise" | "label_flip" | "nan"
  int64_t attackers = 0;
  double attack_scale = 10;  // scale: the factor
  double attack_noise = 1;   // noise: the standard deviation of the update sent instead
};

}  // namespace brigade
