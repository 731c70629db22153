#pragma once
// A training checkpoint on top of ckpt/: model.safetensors (every parameter under its GPT-2
// name and shape), optimizer.safetensors (each state buffer over the optimizer's flat range),
// the tokenizer the run trained, and a JSON state (step, optimizer updates, sampler position,
// resolved config, provenance).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "brigade/model/model.h"
#include "brigade/sync/optimizer.h"

namespace brigade {

struct SavedState {
  int64_t step = 0;      // optimizer steps completed
  int64_t updates = 0;   // updates applied (steps minus skipped non-finite steps)
  nlohmann::json extra;  // sampler, config, provenance: as given to save_checkpoint
};

// Commits <root>/step_<step>/ atomically and keeps the newest keep_last. tokenizer_file ("" for
// none) is copied in. Returns the committed folder. Throws IoError.
std::string save_checkpoint(const std::string& root, const SavedState& state, const Model& model,
                            Optimizer& optimizer, int keep_last, const std::string& tokenizer_file);

// Loads the newest valid checkpoint under root into model and optimizer (rejected ones are
// reported on stderr and skipped). nullopt when there is none. Throws CheckpointError when
// the checkpoint does not fit the model (a tensor missing or of another shape). check, if
// given, sees the saved state (and the folder) before any tensor is read and may throw to refuse
// it.
using CheckpointCheck = std::function<void(const SavedState&, const std::string& dir)>;
std::optional<SavedState> load_latest_checkpoint(const std::string& root, Model& model,
                                                 Optimizer& optimizer, std::string* dir = nullptr,
                                                 const CheckpointCheck& check = {});

// Loads only the parameters of the checkpoint folder dir into model (for generation and
// evaluation). Returns its state.
SavedState load_model_weights(const std::string& dir, Model& model);

}  // namespace brigade
