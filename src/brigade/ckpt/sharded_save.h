#pragma once
// Saving a sharded checkpoint: every rank writes its own shard file, rank 0 seals it.
//
// Protocol of save(step) (collective over the saver's communicator):
//   1. every rank writes what the plan gives it to write (ShardPlan::written()) into
//      <root>/step_N.tmp/rank_<r>.safetensors, fsyncs it and the folder. A failure here is
//      not thrown: it becomes this rank's report.
//   2. all_gather of each rank's report {file, bytes, crc32, rank_state, error}. This is the
//      barrier: when it returns, every rank's file is durable (or has failed).
//   3. rank 0, if no rank failed: the manifest (format 2: shard index + every file's digest +
//      caller state), fsync, rename step_N.tmp -> step_N, `latest`, keep the last K: exactly
//      CheckpointWriter's commit (ckpt/checkpoint.h), with its crash guarantees.
//   4. broadcast of rank 0's outcome, so every rank returns the same SaveResult.
// A rank that dies at any point makes steps 2 or 4 fail on the others with a CommError, which
// is reported as a failed save; nothing was renamed unless step 3 finished, so `latest` still
// names the previous complete checkpoint. A failed step leaves only step_N.tmp, which the
// next successful save removes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/shard_plan.h"
#include "brigade/comm/communicator.h"

namespace brigade {

// The outcome of one save, identical on every rank (unless the communicator itself failed,
// in which case each rank reports what it saw).
struct SaveResult {
  int64_t step = -1;
  bool ok = false;
  std::string error;   // why the save failed, naming the rank and the file; "" when ok
  std::string dir;     // the committed folder when ok
  double seconds = 0;  // write + commit, on this rank
};

class ShardedCheckpointSaver {
 public:
  // Collective over comm: builds the ShardPlan from every rank's `pieces` (throws ConfigError
  // if they do not fit together, CommError if the exchange fails). The saver uses comm for its
  // own collectives only during construction and save(); whoever calls them must make sure no
  // other thread runs collectives on comm at the same time (AsyncCheckpointSaver gives it a
  // communicator of its own).
  ShardedCheckpointSaver(std::string root, Communicator& comm, std::vector<ShardPiece> pieces,
                         nlohmann::json mesh = nlohmann::json::object(),
                         CheckpointOptions options = {});

  // Collective: every rank calls it with the same step. data[i] holds pieces()[i]'s elements
  // (it is read only for pieces this rank writes). state (rank 0's is used) goes into the
  // manifest verbatim; rank_state is stored per rank (RNG state, ...). I/O and communication
  // failures are returned, not thrown.
  SaveResult save(int64_t step, std::span<const void* const> data, const nlohmann::json& state,
                  const nlohmann::json& rank_state = nullptr);
  // The same, with data[j] holding exactly the bytes of plan().written()[j] (what an
  // asynchronous snapshot keeps).
  SaveResult save_written(int64_t step, std::span<const void* const> data,
                          const nlohmann::json& state, const nlohmann::json& rank_state = nullptr);

  const ShardPlan& plan() const { return plan_; }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  Communicator& comm_;
  CheckpointOptions options_;
  ShardPlan plan_;
};

}  // namespace brigade
