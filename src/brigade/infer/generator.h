#pragma once
// Text generation from a GPT: many prompts, decoded together with continuous batching (a
// finished sequence's slot takes the next prompt at once, as vLLM schedules), on the key-value
// cache (model/gpt_decoder.h) or, for comparison, by rerunning the whole window per token (the
// full forward, one sequence at a time).
//
// The context window: a sequence whose tokens outgrow the model's seq_len keeps its last
// seq_len / 2 tokens and continues from them (re-prefilled into the cache), the same rule with
// and without the cache, so both compute the same logits up to f32 rounding. A prompt longer
// than seq_len starts from its last seq_len tokens.
//
// A completion ends after max_new_tokens, or at the first occurrence of a stop string in its text
// (the stop string itself is not part of the completion). Streaming hands out each completion's
// text once it can no longer become part of a stop string.
//
// The model is the whole GPT on this rank (split over tp or not), or this rank's pipeline stage
// (infer/pipeline_decoder.h): every rank runs the same schedule on the same sampled tokens.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/comm/communicator.h"
#include "brigade/data/tokenizer.h"
#include "brigade/infer/sampler.h"
#include "brigade/model/gpt.h"
#include "brigade/model/gpt_decoder.h"

namespace brigade {

// What a Generator runs (not owned).
struct GenerationModel {
  Gpt* whole = nullptr;        // the model when one stage holds it (also for --no-kv-cache)
  DecoderWeights stage;        // this rank's weights: the whole model, or its pipeline stage
  Communicator* pp = nullptr;  // the pipeline group; null for one stage
  const GptConfig& config() const { return *stage.config; }
  int stages() const { return pp ? pp->size() : 1; }
  bool distributed() const { return stage.tp.active() || stages() > 1; }
};

GenerationModel whole_model(Gpt& model);

struct GenerationOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 200;
  std::vector<std::string> stop;  // stop strings; none by default
  int64_t batch = 8;              // sequences decoded together (key-value cache only)
  bool kv_cache = true;
};

struct Completion {
  std::string text;        // the generated text, without the prompt (or a stop string)
  int64_t new_tokens = 0;  // tokens sampled
  std::string finish;      // "length" or "stop"
};

struct GenerationStats {
  int64_t processed_tokens = 0;  // token rows run through the model (prefill, decode, reruns)
  int64_t new_tokens = 0;        // tokens sampled
  int64_t steps = 0;             // model steps (decoder steps, or full forwards)
  double seconds = 0;
};

// (prompt index, text): the next final piece of that prompt's completion.
using TextCallback = std::function<void(size_t, std::string_view)>;

class Generator {
 public:
  // ConfigError for options out of range, and for kv_cache = false under tensor or pipeline
  // parallelism.
  Generator(Gpt& model, const Tokenizer& tokenizer, GenerationOptions options);
  Generator(const GenerationModel& model, const Tokenizer& tokenizer, GenerationOptions options);

  // Collective over the model's tp and pp groups: every rank must pass the same prompts and gets
  // the same completions. on_text may be empty.
  std::vector<Completion> run(const std::vector<std::string>& prompts,
                              const TextCallback& on_text = {});

  const GenerationStats& stats() const { return stats_; }

 private:
  struct Sequence;
  void admit(Sequence& s, size_t index, const std::string& prompt) const;
  void fit_window(Sequence& s) const;
  // Appends a sampled token; returns true when the completion is finished.
  bool append(Sequence& s, int32_t token, const TextCallback& on_text);
  std::vector<Completion> run_cached(const std::vector<std::string>& prompts,
                                     const TextCallback& on_text);
  std::vector<Completion> run_uncached(const std::vector<std::string>& prompts,
                                       const TextCallback& on_text);

  GenerationModel model_;
  const Tokenizer& tokenizer_;
  GenerationOptions options_;
  TokenSampler sampler_;
  size_t hold_back_ = 0;  // bytes that may still turn into a stop string
  GenerationStats stats_;
};

}  // namespace brigade
