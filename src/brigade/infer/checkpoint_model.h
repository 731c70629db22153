#pragma once
// A GPT checkpoint opened for generation (`brigade generate`, `brigade serve`): its config, its
// tokenizer (the checkpoint's BPE merges, or bytes) and then its weights, into this rank's
// tensor-parallel shards when a communicator splits the model.
#include <memory>
#include <string>

#include "brigade/comm/communicator.h"
#include "brigade/data/tokenizer.h"
#include "brigade/model/gpt.h"
#include "brigade/runtime/config.h"

namespace brigade {

struct GenerationCheckpoint {
  std::string dir;  // the checkpoint folder read
  Config config;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Resolves and validates the checkpoint (a step folder or a run folder's newest). Throws
// ConfigError for a model that is not a GPT, CheckpointError for a tokenizer larger than the
// model's vocabulary (it does not belong to this checkpoint), IoError for a missing folder.
GenerationCheckpoint open_generation_checkpoint(const std::string& path);

// The model, split over tp (null: whole), with its weights. Collective over tp. A checkpoint of
// a LoRA run comes back as the plain model with its adapters merged (model/lora_merge.h), which
// is what the decoder and every sampler run.
std::unique_ptr<Gpt> load_generation_model(const GenerationCheckpoint& ckpt, Communicator* tp);

}  // namespace brigade
