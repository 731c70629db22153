#pragma once
// Turns the run's [parallel] and [sync] sections into the DpStrategy the trainer drives: DDP or
// a ZeRO stage (parallel/dp_strategy.h) for sync.method = "ddp", ReplicaSync with the chosen
// low-communication method (sync/replica_sync.h) otherwise.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "brigade/comm/communicator.h"
#include "brigade/comm/store.h"
#include "brigade/model/model.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/runtime/config.h"
#include "brigade/sync/replica_sync.h"

namespace brigade {

// dp: the data-parallel group, or null for a single process. One process has no replica to
// sync with, so every method is then plain local training with train.optimizer (the caller
// says so in the log). store: the job's rendezvous store, which DiLoCo with sync.quorum < 1
// exchanges through (sync/lowcomm/quorum_exchange.h); log: where it reports who was left out.
// Throws ConfigError when the method does not fit the model (or needs a store and has none).
// rank, ranks: this process's place among the data-parallel ranks when dp is null although there
// are several (parameter-server workers under ssp/asp, which step with no collective).
std::unique_ptr<DpStrategy> make_sync_strategy(
    const Config& config, Communicator* dp, Model& model, std::shared_ptr<Store> store = nullptr,
    std::function<void(const std::string&)> log = nullptr, int rank = 0, int ranks = 1);

// The low-communication method sync.method names (not "ddp" or "ps") over one synced range: a
// whole model's, or under model parallelism one pipeline chunk's tp shard, whose replicas are
// the ranks of `replicas` (at least 2). Throws ConfigError as make_sync_strategy.
std::unique_ptr<ReplicaSync> make_replica_sync(
    const Config& config, Communicator& replicas, const SyncedParams& synced,
    std::shared_ptr<Store> store = nullptr, std::function<void(const std::string&)> log = nullptr);

// What a checkpoint records of how replicas were synced ({method, replicas}), and the check
// that a resume can continue it: every layout that syncs by exact all-reduce (DDP, ZeRO, the
// model-parallel engine's dp) resumes any other's checkpoint; a low-communication method keeps
// state per replica, so it resumes only its own method on as many replicas. saved_state is the
// checkpoint's state (its "sync" record; none means DDP). Throws ConfigError otherwise.
nlohmann::json sync_record(const Config& config, int64_t replicas);
void check_sync_record(const nlohmann::json& saved_state, const Config& config, int64_t replicas,
                       const std::string& dir);

// How gradients travel when replicas average them (DDP, ZeRO, the dp axis under tp/pp/ep): the
// bucket of parallel.bucket_mb in floats (at least 1), and the payload (sync.payload with
// sync.method = "ddp", else parallel.grad_wire).
int64_t gradient_bucket_floats(const ParallelConfig& parallel);
WireDtype gradient_wire(const Config& config);

// The wire format sync.payload = "auto" stands for with this method.
std::string resolved_payload(const SyncConfig& sync, const ParallelConfig& parallel);

// One line for the log: the method and its settings, e.g. "diloco (H = 50, outer lr 0.7, ...)".
std::string describe_sync(const SyncConfig& sync, const ParallelConfig& parallel);

}  // namespace brigade
