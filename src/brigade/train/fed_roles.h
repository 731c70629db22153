#pragma once
// sync.method = "fed": the job's processes split into a federation (fed/, docs/federated.md).
// Rank 0 is the coordinator: it holds the global model, reads only the held-out test set
// (fed.test_data) and writes the run folder's metrics and state. Ranks 1..N are the clients
// 0..N-1: client k reads fed.client_data with "{client}" replaced by k, and nothing else. They
// find each other through the job's rendezvous store and talk over ZeroMQ with CURVE keys
// (fed/rendezvous.h). Under `brigade launch` a client that fails does not stop the job: the
// federation goes on without it (runtime/launcher.h).
#include <string>

#include "brigade/runtime/config.h"
#include "brigade/runtime/process_group.h"
#include "brigade/train/job_plan.h"

namespace brigade {

// fed.client_data for client k.
std::string client_data_folder(const FedConfig& fed, int client);
// `pattern` with every "{client}" replaced by the client's index.
std::string with_client(const std::string& pattern, int client);

// Runs this process's role (plan: plan_job over the group, roles = kFederation); returns the
// exit code.
int train_federated(const Config& config, ProcessGroup group, const JobPlan& plan);

// A federation started by hand, one process per role, with no launcher or store between them
// (docs/federated.md, "Started by hand"): membership is fed.client_public's keys, the run tag
// is derived from the coordinator's public key and run.name.
//   `brigade fed-server`: the coordinator of fed.clients clients, bound at fed.bind.
//   `brigade fed-client --client K`: client K, connecting to fed.coordinator.
// Each throws ConfigError naming a missing key; returns the exit code.
int serve_federation(const Config& config);
int join_federation(const Config& config, int client);

}  // namespace brigade
