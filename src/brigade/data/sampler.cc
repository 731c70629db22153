#include "brigade/data/sampler.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "brigade/base/check.h"
#include "brigade/base/error.h"
#include "brigade/base/json_limits.h"
#include "brigade/tensor/rng.h"

namespace brigade {

namespace {

void require_positive(const char* field, int64_t value) {
  if (value <= 0) {
    throw ConfigError(std::string("sampler ") + field + " = " + std::to_string(value) +
                      ": must be > 0");
  }
}

template <typename T>
T get_field(const nlohmann::json& j, const char* field, T min_value) {
  (void)min_value;  // only the signed instantiations use it
  if (!j.is_object() || !j.contains(field)) {
    throw CheckpointError(std::string("sampler state: missing field '") + field + "'");
  }
  const nlohmann::json& v = j.at(field);
  if (!v.is_number_integer()) {
    throw CheckpointError(std::string("sampler state: field '") + field +
                          "' is not an integer: " + json_excerpt(v));
  }
  if constexpr (std::is_signed_v<T>) {
    const bool too_large =
        v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
    if (too_large || v.get<int64_t>() < min_value) {
      throw CheckpointError(std::string("sampler state: field '") + field +
                            "' = " + json_excerpt(v) + " is outside [" + std::to_string(min_value) +
                            ", 2^63)");
    }
  } else if (!v.is_number_unsigned() && v.get<int64_t>() < 0) {
    throw CheckpointError(std::string("sampler state: field '") + field +
                          "' must be non-negative: " + json_excerpt(v));
  }
  return v.get<T>();
}

}  // namespace

int64_t global_example_index(int64_t step, int64_t micro_step, int64_t dp_rank, int64_t dp_size,
                             int64_t micro_batch, int64_t grad_accum, int64_t i) {
  BRIGADE_CHECK(step >= 0 && micro_step >= 0 && micro_step < grad_accum && dp_rank >= 0 &&
                dp_rank < dp_size && i >= 0 && i < micro_batch)
      << "step " << step << " micro_step " << micro_step << "/" << grad_accum << " rank " << dp_rank
      << "/" << dp_size << " i " << i << "/" << micro_batch;
  const int64_t global_batch = micro_batch * grad_accum * dp_size;
  return step * global_batch + (micro_step * dp_size + dp_rank) * micro_batch + i;
}

void to_json(nlohmann::json& j, const SamplerState& s) {
  j = nlohmann::json{{"seed", s.seed},
                     {"num_examples", s.num_examples},
                     {"global_batch", s.global_batch},
                     {"steps_consumed", s.steps_consumed}};
}

void from_json(const nlohmann::json& j, SamplerState& s) {
  s.seed = get_field<uint64_t>(j, "seed", 0);
  s.num_examples = get_field<int64_t>(j, "num_examples", 1);
  s.global_batch = get_field<int64_t>(j, "global_batch", 1);
  s.steps_consumed = get_field<int64_t>(j, "steps_consumed", 0);
}

Sampler::Sampler(const SamplerOptions& options) : options_(options) {
  require_positive("num_examples", options.num_examples);
  require_positive("micro_batch", options.micro_batch);
  require_positive("grad_accum", options.grad_accum);
  require_positive("dp_size", options.dp_size);
  if (options.dp_rank < 0 || options.dp_rank >= options.dp_size) {
    throw ConfigError("sampler dp_rank = " + std::to_string(options.dp_rank) +
                      ": must be in [0, dp_size = " + std::to_string(options.dp_size) + ")");
  }
  global_batch_ = options.micro_batch * options.grad_accum * options.dp_size;
}

int64_t Sampler::example_at(int64_t g) const {
  BRIGADE_CHECK(g >= 0) << "global index " << g;
  const int64_t n = options_.num_examples;
  const uint64_t epoch = static_cast<uint64_t>(g / n);
  // Constructing a permutation only derives its key and bit width: cheap enough per example.
  const RandomPermutation perm(static_cast<uint64_t>(n), options_.seed,
                               mix_keys(kSamplerKey, epoch));
  return static_cast<int64_t>(perm(static_cast<uint64_t>(g % n)));
}

void Sampler::micro_batch_examples(int64_t step, int64_t micro_step, int64_t* ids) const {
  micro_batch_examples(step, micro_step, options_.dp_rank, ids);
}

void Sampler::micro_batch_examples(int64_t step, int64_t micro_step, int64_t dp_rank,
                                   int64_t* ids) const {
  const SamplerOptions& o = options_;
  BRIGADE_CHECK(dp_rank >= 0 && dp_rank < o.dp_size) << dp_rank << " of " << o.dp_size;
  for (int64_t i = 0; i < o.micro_batch; ++i) {
    ids[i] = example_at(
        global_example_index(step, micro_step, dp_rank, o.dp_size, o.micro_batch, o.grad_accum, i));
  }
}

SamplerState Sampler::state(int64_t steps_consumed) const {
  BRIGADE_CHECK(steps_consumed >= 0) << steps_consumed;
  return {options_.seed, options_.num_examples, global_batch_, steps_consumed};
}

int64_t Sampler::resume_step(const SamplerState& saved) const {
  auto mismatch = [](const char* what, const std::string& saved_v, const std::string& now) {
    return CheckpointError("cannot resume the data order: checkpoint " + std::string(what) + " = " +
                           saved_v + " but this run has " + now);
  };
  if (saved.seed != options_.seed) {
    throw mismatch("seed", std::to_string(saved.seed), std::to_string(options_.seed));
  }
  if (saved.num_examples != options_.num_examples) {
    throw mismatch("num_examples", std::to_string(saved.num_examples),
                   std::to_string(options_.num_examples));
  }
  if (saved.global_batch != global_batch_) {
    throw mismatch("global_batch", std::to_string(saved.global_batch),
                   std::to_string(global_batch_));
  }
  if (saved.steps_consumed < 0) {
    throw CheckpointError(
        "sampler state: steps_consumed = " + std::to_string(saved.steps_consumed) + " is negative");
  }
  return saved.steps_consumed;
}

}  // namespace brigade
