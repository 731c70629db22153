#include "brigade/infer/checkpoint_model.h"

#include <fmt/format.h>

#include "brigade/base/error.h"
#include "brigade/ckpt/checkpoint.h"
#include "brigade/ckpt/sharded_reader.h"
#include "brigade/data/bpe.h"
#include "brigade/data/byte_tokenizer.h"
#include "brigade/model/lora_merge.h"
#include "brigade/model/tp/tp_layout.h"
#include "brigade/parallel/tp_state_pieces.h"
#include "brigade/train/checkpointing.h"
#include "brigade/train/model_factory.h"

namespace brigade {

GenerationCheckpoint open_generation_checkpoint(const std::string& path) {
  GenerationCheckpoint ckpt;
  ckpt.dir = resolve_checkpoint_dir(path);
  const ShardedCheckpointReader reader = ShardedCheckpointReader::open(ckpt.dir);
  ckpt.config = checkpoint_config(reader);
  if (ckpt.config.model.kind != ModelKind::kGpt) {
    throw ConfigError(fmt::format("model.kind = \"{}\": generation needs a gpt checkpoint",
                                  ckpt.config.model.kind));
  }
  if (const std::optional<std::string> merges = checkpoint_tokenizer(reader)) {
    ckpt.tokenizer =
        std::make_unique<BpeTokenizer>(BpeTokenizer::parse(*merges, ckpt.dir + "/tokenizer.bpe"));
  } else {
    ckpt.tokenizer = std::make_unique<ByteTokenizer>();
  }
  // Prompt ids index the embedding: a tokenizer larger than the model's vocabulary (a merges
  // file that does not belong to this checkpoint) is refused rather than read past the table.
  if (ckpt.tokenizer->vocab_size() > ckpt.config.model.vocab) {
    throw CheckpointError(fmt::format(
        "{}: its tokenizer has {} ids but model.vocab = {}; the tokenizer does not belong to "
        "this checkpoint",
        ckpt.dir, ckpt.tokenizer->vocab_size(), ckpt.config.model.vocab));
  }
  return ckpt;
}

std::unique_ptr<Gpt> load_generation_model(const GenerationCheckpoint& ckpt, Communicator* tp) {
  const GptConfig gpt = gpt_config(ckpt.config.model);
  const int tp_size = tp ? tp->size() : 1;
  if (tp_size > 1) validate_tensor_parallel(without_lora(gpt), tp_size, false);
  auto model = std::make_unique<Gpt>(without_lora(gpt), 1,
                                     TpContext{.comm = tp, .sequence_parallel = false});
  if (!gpt.lora()) {
    load_initial_weights(ckpt.dir, tp, tp_state_pieces(model->layout(), model->params()));
    return model;
  }
  // LoRA: the adapted model whole on every rank, its adapters merged into the base weights (what
  // `brigade export` writes), then this rank's shards of those.
  Gpt adapted(gpt, 1);
  load_initial_weights(ckpt.dir, tp, tp_state_pieces(adapted.layout(), adapted.params()));
  Gpt merged(without_lora(gpt), 1);
  merge_lora_into_base(gpt, adapted.layout(), adapted.params(), merged.layout(), merged.params());
  slice_from_full(model->layout(), merged.layout(), merged.params(), model->params());
  return model;
}

std::unique_ptr<StageWeights> load_generation_stage(const GenerationCheckpoint& ckpt,
                                                    int first_layer, int end_layer,
                                                    const TpContext& tp, Communicator* world) {
  const GptConfig gpt = gpt_config(ckpt.config.model);
  auto stage = std::make_unique<StageWeights>(without_lora(gpt), first_layer, end_layer, tp);
  if (!gpt.lora()) {
    load_initial_weights(ckpt.dir, world, tp_state_pieces(stage->layout(), stage->params()));
    return stage;
  }
  Gpt adapted(gpt, 1);
  load_initial_weights(ckpt.dir, world, tp_state_pieces(adapted.layout(), adapted.params()));
  Gpt merged(without_lora(gpt), 1);
  merge_lora_into_base(gpt, adapted.layout(), adapted.params(), merged.layout(), merged.params());
  slice_from_full(stage->layout(), merged.layout(), merged.params(), stage->params());
  return stage;
}

}  // namespace brigade
