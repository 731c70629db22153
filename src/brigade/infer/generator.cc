#include "brigade/infer/generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "brigade/base/error.h"
#include "brigade/infer/pipeline_decoder.h"
#include "brigade/monitor/timer.h"

namespace brigade {

struct Generator::Sequence {
  size_t index = 0;             // the prompt's
  std::vector<int32_t> window;  // the model's context
  int64_t cached = 0;           // window tokens already in the cache
  int64_t slot = 0;
  Completion out;
  size_t emitted = 0;  // bytes of out.text handed to the callback
  bool done = false;
};

GenerationModel whole_model(Gpt& model) {
  return {.whole = &model, .stage = decoder_weights(model), .pp = nullptr};
}

Generator::Generator(Gpt& model, const Tokenizer& tokenizer, GenerationOptions options)
    : Generator(whole_model(model), tokenizer, std::move(options)) {}

Generator::Generator(const GenerationModel& model, const Tokenizer& tokenizer,
                     GenerationOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      sampler_(options_.sampling, std::min<int64_t>(model.config().vocab, tokenizer.vocab_size())) {
  if (options_.max_new_tokens < 1) {
    throw ConfigError(fmt::format("--tokens {}: must be >= 1", options_.max_new_tokens));
  }
  if (options_.batch < 1)
    throw ConfigError(fmt::format("--batch {}: must be >= 1", options_.batch));
  if (!options_.kv_cache && (model.distributed() || model.whole == nullptr)) {
    throw ConfigError("--no-kv-cache: the full-forward baseline runs on one process only");
  }
  for (const std::string& s : options_.stop) {
    if (s.empty()) throw ConfigError("--stop \"\": a stop string must not be empty");
    hold_back_ = std::max(hold_back_, s.size() - 1);
  }
}

void Generator::admit(Sequence& s, size_t index, const std::string& prompt) const {
  s.index = index;
  s.window = tokenizer_.encode(prompt);
  if (s.window.empty()) s.window = tokenizer_.encode("\n");
  const auto T = static_cast<size_t>(model_.config().seq_len);
  if (s.window.size() > T) s.window.erase(s.window.begin(), s.window.end() - T);
  s.cached = 0;
}

void Generator::fit_window(Sequence& s) const {
  const auto T = static_cast<size_t>(model_.config().seq_len);
  if (s.window.size() <= T) return;
  s.window.erase(s.window.begin(), s.window.end() - static_cast<int64_t>(T / 2));
  s.cached = 0;
}

bool Generator::append(Sequence& s, int32_t token, const TextCallback& on_text) {
  s.window.push_back(token);
  ++s.out.new_tokens;
  ++stats_.new_tokens;
  const size_t before = s.out.text.size();
  s.out.text += tokenizer_.decode(std::span<const int32_t>(&token, 1));
  for (const std::string& stop : options_.stop) {
    const size_t from = before >= stop.size() - 1 ? before - (stop.size() - 1) : 0;
    const size_t at = s.out.text.find(stop, from);
    if (at != std::string::npos) {
      s.out.text.resize(at);
      s.out.finish = "stop";
      s.done = true;
    }
  }
  if (!s.done && s.out.new_tokens >= options_.max_new_tokens) {
    s.out.finish = "length";
    s.done = true;
  }
  const size_t final_end =
      s.done ? s.out.text.size()
             : (s.out.text.size() > hold_back_ ? s.out.text.size() - hold_back_ : 0);
  if (on_text && final_end > s.emitted) {
    on_text(s.index, std::string_view(s.out.text).substr(s.emitted, final_end - s.emitted));
    s.emitted = final_end;
  }
  return s.done;
}

std::vector<Completion> Generator::run(const std::vector<std::string>& prompts,
                                       const TextCallback& on_text) {
  stats_ = {};
  Stopwatch watch;
  std::vector<Completion> out =
      options_.kv_cache ? run_cached(prompts, on_text) : run_uncached(prompts, on_text);
  stats_.seconds = watch.seconds();
  return out;
}

std::vector<Completion> Generator::run_cached(const std::vector<std::string>& prompts,
                                              const TextCallback& on_text) {
  const int64_t T = model_.config().seq_len;
  const int64_t slots = std::min<int64_t>(options_.batch, static_cast<int64_t>(prompts.size()));
  std::vector<Completion> out(prompts.size());
  if (slots == 0) return out;
  PipelineDecoder decoder(model_.stage, model_.pp, slots, slots * T);
  const auto sample = [&](const Sequence& s, const float* logits) {
    return sampler_.sample(logits, s.index, static_cast<uint64_t>(s.out.new_tokens));
  };
  std::deque<int64_t> free_slots;
  for (int64_t k = 0; k < slots; ++k) free_slots.push_back(k);
  std::vector<Sequence> active;
  std::vector<DecodeSegment> segments;
  std::vector<int32_t> tokens, sampled;
  size_t next = 0;
  while (next < prompts.size() || !active.empty()) {
    while (next < prompts.size() && !free_slots.empty()) {
      Sequence s;
      admit(s, next, prompts[next]);
      s.slot = free_slots.front();
      free_slots.pop_front();
      active.push_back(std::move(s));
      ++next;
    }
    segments.clear();
    tokens.clear();
    for (Sequence& s : active) {
      fit_window(s);
      const auto n = static_cast<int64_t>(s.window.size()) - s.cached;
      segments.push_back({.slot = s.slot, .pos = s.cached, .n = n});
      tokens.insert(tokens.end(), s.window.begin() + s.cached, s.window.end());
      stats_.processed_tokens += n;
    }
    sampled.resize(active.size());
    decoder.step(
        segments, tokens.data(),
        [&](size_t k, const float* logits) { return sample(active[k], logits); }, sampled.data());
    ++stats_.steps;
    for (size_t k = 0; k < active.size(); ++k) {
      Sequence& s = active[k];
      s.cached = static_cast<int64_t>(s.window.size());
      append(s, sampled[k], on_text);
    }
    for (auto it = active.begin(); it != active.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      free_slots.push_back(it->slot);
      out[it->index] = std::move(it->out);
      it = active.erase(it);
    }
  }
  return out;
}

std::vector<Completion> Generator::run_uncached(const std::vector<std::string>& prompts,
                                                const TextCallback& on_text) {
  const int64_t V = model_.config().vocab;
  std::vector<Completion> out(prompts.size());
  Batch batch;
  batch.size = 1;
  batch.tokens.resize(static_cast<size_t>(model_.config().seq_len));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Sequence s;
    admit(s, i, prompts[i]);
    while (true) {
      fit_window(s);
      const auto n = static_cast<int64_t>(s.window.size());
      std::copy(s.window.begin(), s.window.end(), batch.tokens.begin());
      batch.seq_len = n;
      const float* logits = model_.whole->forward_logits(batch) + (n - 1) * V;
      ++stats_.steps;
      stats_.processed_tokens += n;
      const int32_t token =
          sampler_.sample(logits, s.index, static_cast<uint64_t>(s.out.new_tokens));
      if (append(s, token, on_text)) break;
    }
    out[i] = std::move(s.out);
  }
  return out;
}

}  // namespace brigade
