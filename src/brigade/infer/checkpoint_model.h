#pragma once
// A GPT checkpoint opened for generation (`brigade generate`, `brigade serve`): its config, its
// tokenizer (the checkpoint's BPE merges, or bytes) and then its weights, into this rank's
// tensor-parallel shards when a communicator splits the model, or into this rank's pipeline
// stage (its blocks' tensors only) when the model is split over stages.
#include <memory>
#include <string>

#include "brigade/comm/communicator.h"
#include "brigade/data/tokenizer.h"
#include "brigade/infer/stage_weights.h"
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

// Blocks [first_layer, end_layer) of the model (with the embeddings on the first stage, ln_f and
// the head on the last), tp.comm's shards of them, with their weights: only the stage's tensors
// are read (a LoRA checkpoint's adapted model is read whole and merged first). Collective over
// world (every rank of the job, each with its own stage).
std::unique_ptr<StageWeights> load_generation_stage(const GenerationCheckpoint& ckpt,
                                                    int first_layer, int end_layer,
                                                    const TpContext& tp, Communicator* world);

}  // namespace brigade
