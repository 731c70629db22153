#pragma once
// The trainer's checkpoints on top of ckpt/: a sharded checkpoint (format 2,
// docs/checkpoints.md) in which every rank writes its own pieces of the training state (the
// DpStrategy's checkpoint_pieces(): parameters under their GPT-2 names, optimizer state per
// tensor as "adamw.m/<tensor>", per-replica state under per-replica names), rank 0 the
// tokenizer the run trained (tensor "tokenizer.bpe", U8), and the manifest a JSON state (step,
// optimizer updates, sampler position, resolved config, provenance). Any number of ranks under
// any strategy reads it back, each rank only the regions it holds.
//
// Format-1 checkpoints (rank 0 wrote model.safetensors + optimizer.safetensors, as
// `brigade import` still does) load through the same reader.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brigade/ckpt/async_save.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/ckpt/sharded_save.h"
#include "brigade/comm/comm_factory.h"
#include "brigade/model/model.h"
#include "brigade/optim/optimizer.h"
#include "brigade/parallel/dp_strategy.h"
#include "brigade/runtime/config.h"

namespace brigade {

struct SavedState {
  int64_t step = 0;      // optimizer steps completed
  int64_t updates = 0;   // updates applied (steps minus skipped non-finite steps)
  nlohmann::json extra;  // sampler, config, provenance: as given to the saver
};

struct TrainingCheckpointOptions {
  std::string root;                                // <run>/checkpoints
  int keep_last = 3;                               // train.keep_checkpoints
  bool async = true;                               // train.async_checkpoint
  std::string tokenizer_file;                      // copied in by rank 0; "" for byte tokens
  nlohmann::json mesh = nlohmann::json::object();  // stored in the manifest as is
};

// Saves the trainer's checkpoints. Async: save() copies this rank's pieces into host memory
// and returns; a background thread writes and commits over a communicator of its own. Sync:
// save() writes and commits on the calling thread over the training communicator.
class TrainingCheckpointer {
 public:
  // Collective over the job. world: the training communicator (null: one process);
  // world_options created it (the async saver's communicator derives from them). pieces: the
  // strategy's, in a fixed order. Throws ConfigError if the ranks' pieces do not fit together.
  TrainingCheckpointer(TrainingCheckpointOptions options, Communicator* world,
                       const CommOptions& world_options, std::vector<StatePiece> pieces);
  ~TrainingCheckpointer();

  // Collective: every rank, the same steps in the same order. Async: returns once the snapshot
  // is taken (waiting first for a save still in flight); sync: once committed. Returns the
  // results of the saves that finished since the last call (at most one), failed ones included;
  // a failed save is retried simply by the next call.
  std::vector<SaveResult> save(const SavedState& state);
  // Waits for the save in flight, if any, and returns its result.
  std::optional<SaveResult> wait();
  // The results of saves that finished since the last call, without blocking (asynchronous
  // saves; none for synchronous ones, which save() returns).
  std::vector<SaveResult> poll();
  // The blocking part of the last save() on this rank, in seconds.
  double last_blocking_s() const { return last_blocking_s_; }

 private:
  TrainingCheckpointOptions options_;
  std::vector<StatePiece> pieces_;
  std::string tokenizer_;  // rank 0: the merges, saved as a U8 tensor
  std::vector<const void*> data_;
  std::unique_ptr<Communicator> own_comm_;  // the async saver's, or a 1-rank one
  std::unique_ptr<AsyncCheckpointSaver> async_;
  std::unique_ptr<ShardedCheckpointSaver> sync_;
  std::optional<SaveResult> pending_;  // sync: a finished result not yet returned
  double last_blocking_s_ = 0;
};

// Collective over world (null: one process). Every rank opens the newest valid checkpoint
// under root (rejected ones are reported on stderr by rank 0 and skipped; rejections, if given,
// gets every message) and reads each of its pieces from it. nullopt when there is none. check,
// if given, sees the saved state and the folder before any tensor is read and may throw to
// refuse it. Throws CheckpointError when the checkpoint does not fit (a tensor missing or of
// another shape).
// layout, if given, is the whole model's tp = 1 layout: checkpoints written before format 3 by
// data-parallel runs hold optimizer state flat in its order, and are read per tensor through it.
using CheckpointCheck = std::function<void(const SavedState&, const std::string& dir)>;
std::optional<SavedState> load_latest_checkpoint(const std::string& root, Communicator* world,
                                                 const std::vector<StatePiece>& pieces,
                                                 std::string* dir = nullptr,
                                                 const CheckpointCheck& check = {},
                                                 std::vector<std::string>* rejections = nullptr,
                                                 const ParamLayout* layout = nullptr);

// train.init_from: reads only the parameters among `pieces` (this run's layout, whatever layout
// wrote the source) from the checkpoint `source` names (a checkpoint folder, a run folder or a
// checkpoints root: its newest valid checkpoint). Collective over world. Returns the folder
// read, and its step in *step. CheckpointError naming the tensor when a shape differs. LoRA
// adapters the source does not hold (a base run) are skipped: they keep their initialisation.
// A source "hf:DIR" is a Hugging Face GPT-2 folder (config.json, model.safetensors), read by
// every rank whole (its step is 0); its config.json must describe the run's model.
inline constexpr const char* kHfSourcePrefix = "hf:";
std::string load_initial_weights(const std::string& source, Communicator* world,
                                 const std::vector<StatePiece>& pieces, int64_t* step = nullptr);

// Makes the flat state buffers of a checkpoint written before format 3 ("adamw.m" of shape
// (num_params,) in layout order) readable as the per-tensor tensors ("adamw.m/<tensor>") that
// `pieces` name and the checkpoint lacks. No-op for format-3 checkpoints.
void view_legacy_flat_state(ShardedCheckpointReader& reader, const std::vector<StatePiece>& pieces,
                            const ParamLayout& layout);

// Format 1 (`brigade import`'s step-0 checkpoint): commits <root>/step_<step>/ with the full
// model and optimizer state written by this process alone, keeping the newest keep_last.
// tokenizer_file ("" for none) is copied in. Returns the committed folder. Throws IoError.
std::string save_checkpoint(const std::string& root, const SavedState& state, const Model& model,
                            Optimizer& optimizer, int keep_last, const std::string& tokenizer_file);

// Loads only the parameters of an opened checkpoint (either format, whole tensors) into model,
// for generation, evaluation and export. Returns its state. Throws CheckpointError when a
// parameter is missing or of another shape.
SavedState load_model_weights(const ShardedCheckpointReader& reader, Model& model);

// The BPE merges the checkpoint carries, or nullopt for a byte-level model.
std::optional<std::string> checkpoint_tokenizer(const ShardedCheckpointReader& reader);

// The config the checkpoint's run trained with (its manifest's "config"), parsed. Throws
// CheckpointError when the manifest holds none, ConfigError when it does not parse.
Config checkpoint_config(const ShardedCheckpointReader& reader);

}  // namespace brigade
