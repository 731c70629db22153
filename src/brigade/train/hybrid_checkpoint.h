#pragma once
// Checkpoints of a model-parallel run (model_parallel_trainer.h), written with the sharded
// saver (ckpt/sharded_save.h) in the full, tp = 1 layout: every tensor under its GPT-2 name and
// its full shape, every optimizer state tensor as "<state>/<tensor>" ("adamw.m/h.0.ln_1.weight").
// Each tensor group (the tp ranks of one pipeline chunk) first gathers its chunk's full tensors
// (tp_layout.h gather_full, one all-reduce per buffer); every rank then declares the whole
// tensors it holds, and the plan lets the lowest rank of those declaring a tensor write it: one
// copy of each tensor, the tied wte (held by the first and the last stage) included. Because
// the files hold whole tensors by name, a checkpoint loads under any other tp x pp x dp layout
// of the same model and optimizer.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "brigade/ckpt/sharded_save.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/sync/optimizer.h"

namespace brigade {

// One pipeline chunk of this rank with its optimizer.
struct HybridChunk {
  GptStage* stage;
  Optimizer* optimizer;
};

class HybridCheckpointer {
 public:
  // Collective over world (builds the shard plan). chunks must stay valid.
  HybridCheckpointer(std::string root, Communicator& world, const TpContext& tp,
                     std::vector<HybridChunk> chunks, int keep_last, nlohmann::json mesh);
  ~HybridCheckpointer();

  // Collective over world: gathers and writes step's checkpoint; state goes into the manifest.
  SaveResult save(int64_t step, const nlohmann::json& state);

  // Collective over world: loads the newest valid checkpoint under root into the chunks'
  // parameters and optimizer state and returns its manifest state, or nullopt when there is
  // none. Throws CheckpointError if it lacks a tensor this layout needs (e.g. written by a
  // run with another optimizer).
  std::optional<nlohmann::json> restore(std::string* dir);

 private:
  struct Part;
  void gather();

  std::string root_;
  Communicator& world_;
  TpContext tp_;
  std::vector<std::unique_ptr<Part>> parts_;  // per chunk
  std::vector<const void*> data_;             // per declared piece
  std::unique_ptr<ShardedCheckpointSaver> saver_;
};

}  // namespace brigade
