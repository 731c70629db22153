#pragma once
// Turns a config's [data] section into the train and validation datasets of a run.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brigade/data/loader.h"
#include "brigade/data/tokenizer.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/run_folder.h"

namespace brigade {

// The files of a tokenized corpus folder of the single-file layout (before numbered shards and
// index.json, data/shard_index.h, which `brigade tokenize` now writes); data.source = "shards"
// reads both.
inline constexpr const char* kTrainShardFile = "train.bin";
inline constexpr const char* kValShardFile = "val.bin";
inline constexpr const char* kTokenizerFile = "tokenizer.bpe";  // absent for byte tokens

struct TrainingData {
  // Shared: evaluating every document (load_evaluation_data's whole) makes both the same set.
  std::shared_ptr<Dataset> train;
  std::shared_ptr<Dataset> val;
  std::unique_ptr<Tokenizer> tokenizer;   // null for image data
  std::string tokenizer_file;             // BPE merges saved in the run folder, or ""
  std::vector<std::string> source_files;  // every file read, for the provenance manifest
  // Text only: bytes per token on the validation split, and the cross-entropy in bits per
  // byte of the validation split under the train split's byte frequencies (the unigram
  // baseline a language model has to beat).
  double val_bytes_per_token = 1.0;
  double unigram_bits_per_byte = 0.0;
  std::string summary;  // one line for the log
};

// Loads the corpus (or image set), splits it, trains the BPE tokenizer on the train split
// (or reloads the one already in the run folder, so a resumed run tokenizes identically)
// and builds the datasets. Every rank trains the same merges from the same text, and rank 0
// alone saves them (ranks writing one file would race on its temporary). Throws IoError /
// ConfigError naming the path or key.
TrainingData load_training_data(const Config& config, const RunFolder& folder, int rank = 0);

// The data of `brigade eval`: config's data tokenized with a checkpoint's tokenizer (merges:
// its BPE merges, or none for bytes; origin names the checkpoint in errors), which is never
// retrained. whole: every document of a text, fortunes or JSONL source is validation (train
// is the same set); otherwise the validation split as training made it. ConfigError where the
// data's tokenizer (a shards folder's) is not the checkpoint's.
TrainingData load_evaluation_data(const Config& config, const std::optional<std::string>& merges,
                                  const std::string& origin, bool whole);

// model.vocab = 0 means "from the data": the vocabulary of a shards folder (its index.json or
// train.bin header; llm.c files record none, so their format's tokenizer: GPT-2's 50257 for
// uint16 files, LLaMA 3's 128256 for uint32), or 256 for byte tokens. Replaces the 0 in config
// (a no-op for any other value), before the layout checks and the run folder see it. IoError
// naming the file that cannot tell.
void resolve_vocab_from_data(Config& config);

// Unigram baseline: -sum log2 p_train(byte) over the bytes of eval_text, per byte, with
// add-one smoothing of the train counts.
double unigram_bits_per_byte(const std::string& train_text, const std::string& eval_text);

}  // namespace brigade
