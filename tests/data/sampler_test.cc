// Distributed sampler: every epoch a permutation, global batches independent of the number of
// data-parallel ranks, and resuming from a saved state continuing the same order.
#include "brigade/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "brigade/base/error.h"
#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

struct Layout {
  int64_t micro_batch, grad_accum, dp_size;
};

// The global batch of `step` as the documented formula concatenates it: micro-steps in order,
// within each micro-step the DP ranks in order.
std::vector<int64_t> global_batch(int64_t n, uint64_t seed, const Layout& l, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < l.grad_accum; ++j) {
    for (int64_t r = 0; r < l.dp_size; ++r) {
      Sampler s({.num_examples = n,
                 .seed = seed,
                 .micro_batch = l.micro_batch,
                 .grad_accum = l.grad_accum,
                 .dp_size = l.dp_size,
                 .dp_rank = r});
      std::vector<int64_t> ids(l.micro_batch);
      s.micro_batch_examples(step, j, ids.data());
      out.insert(out.end(), ids.begin(), ids.end());
    }
  }
  return out;
}

TEST(Sampler, GlobalExampleIndexFormula) {
  // Written out for step 3, G = 2 * 3 * 4 = 24: rank 1, micro-step 2, element 1.
  EXPECT_EQ(global_example_index(3, 2, 1, 4, 2, 3, 1), 3 * 24 + (2 * 4 + 1) * 2 + 1);
  // The (micro_step, rank, i) triples of a step tile [s*G, (s+1)*G) in order.
  int64_t expect = 5 * 24;
  for (int64_t j = 0; j < 3; ++j) {
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t i = 0; i < 2; ++i)
        EXPECT_EQ(global_example_index(5, j, r, 4, 2, 3, i), expect++);
    }
  }
}

TEST(Sampler, EveryEpochIsAPermutationInItsOwnOrder) {
  for (int64_t n : {1, 2, 37, 64, 1000}) {
    Sampler s({.num_examples = n, .seed = 11, .micro_batch = 3});
    std::vector<std::vector<int64_t>> epochs;
    for (int64_t e = 0; e < 3; ++e) {
      std::vector<int64_t> order(n);
      for (int64_t k = 0; k < n; ++k) {
        order[k] = s.example_at(e * n + k);
        // The documented definition, spelled out.
        const RandomPermutation p(n, 11, mix_keys(kSamplerKey, e));
        ASSERT_EQ(order[k], static_cast<int64_t>(p(k)));
      }
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> iota(n);
      std::iota(iota.begin(), iota.end(), 0);
      EXPECT_EQ(sorted, iota) << "epoch " << e << " of n = " << n << " is not a permutation";
      epochs.push_back(order);
    }
    if (n >= 37) {
      EXPECT_NE(epochs[0], epochs[1]);
      EXPECT_NE(epochs[1], epochs[2]);
      Sampler other({.num_examples = n, .seed = 12, .micro_batch = 3});
      int64_t same = 0;
      for (int64_t k = 0; k < n; ++k) same += other.example_at(k) == epochs[0][k];
      EXPECT_LT(same, n / 4) << "seed 12 gives nearly seed 11's order";
    }
  }
}

TEST(Sampler, GlobalBatchDoesNotDependOnDpSize) {
  // G = 8 as (mb x accum x dp): one process, and 2 and 4 ranks. N = 37 so batches straddle
  // epoch boundaries.
  const std::vector<Layout> layouts = {{8, 1, 1}, {2, 4, 1}, {2, 2, 2},
                                       {1, 4, 2}, {2, 1, 4}, {1, 2, 4}};
  const int64_t n = 37;
  std::vector<int64_t> stream;  // the reference: the whole stream in order
  for (int64_t step = 0; step < 15; ++step) {
    const auto ref = global_batch(n, 5, layouts[0], step);
    for (const Layout& l : layouts) {
      EXPECT_EQ(global_batch(n, 5, l, step), ref)
          << "step " << step << " mb " << l.micro_batch << " accum " << l.grad_accum << " dp "
          << l.dp_size;
    }
    stream.insert(stream.end(), ref.begin(), ref.end());
  }
  // 15 steps * 8 = 120 examples = 3 full epochs of 37 plus 9: each full epoch is a permutation.
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> epoch(stream.begin() + e * n, stream.begin() + (e + 1) * n);
    std::sort(epoch.begin(), epoch.end());
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(epoch[k], k);
  }
}

TEST(Sampler, ResumeFromSavedStateContinuesIdentically) {
  const SamplerOptions opts{.num_examples = 101,
                            .seed = 42,
                            .micro_batch = 4,
                            .grad_accum = 2,
                            .dp_size = 2,
                            .dp_rank = 1};
  Sampler uninterrupted(opts);
  std::vector<int64_t> expected;
  std::vector<int64_t> ids(4);
  for (int64_t step = 0; step < 30; ++step) {
    for (int64_t j = 0; j < 2; ++j) {
      uninterrupted.micro_batch_examples(step, j, ids.data());
      expected.insert(expected.end(), ids.begin(), ids.end());
    }
  }
  // Run 13 steps, save, "restart" from JSON text, run the rest.
  std::vector<int64_t> got;
  Sampler first(opts);
  for (int64_t step = 0; step < 13; ++step) {
    for (int64_t j = 0; j < 2; ++j) {
      first.micro_batch_examples(step, j, ids.data());
      got.insert(got.end(), ids.begin(), ids.end());
    }
  }
  const std::string saved = nlohmann::json(first.state(13)).dump();
  const SamplerState restored = nlohmann::json::parse(saved).get<SamplerState>();
  EXPECT_EQ(restored.seed, 42u);
  EXPECT_EQ(restored.num_examples, 101);
  EXPECT_EQ(restored.global_batch, 16);
  EXPECT_EQ(restored.steps_consumed, 13);
  Sampler second(opts);
  for (int64_t step = second.resume_step(restored); step < 30; ++step) {
    for (int64_t j = 0; j < 2; ++j) {
      second.micro_batch_examples(step, j, ids.data());
      got.insert(got.end(), ids.begin(), ids.end());
    }
  }
  EXPECT_EQ(got, expected);

  // Resuming with a different number of DP ranks but the same global batch is allowed...
  SamplerOptions wider = opts;
  wider.dp_size = 4, wider.grad_accum = 1, wider.dp_rank = 0;
  EXPECT_EQ(Sampler(wider).resume_step(restored), 13);
  // ...a different seed, dataset or global batch is not.
  SamplerOptions other = opts;
  other.seed = 43;
  EXPECT_THROW(Sampler(other).resume_step(restored), CheckpointError);
  other = opts;
  other.num_examples = 100;
  EXPECT_THROW(Sampler(other).resume_step(restored), CheckpointError);
  other = opts;
  other.micro_batch = 2;
  EXPECT_THROW(Sampler(other).resume_step(restored), CheckpointError);
}

TEST(Sampler, InvalidStateAndOptions) {
  const nlohmann::json good = {
      {"seed", 1}, {"num_examples", 10}, {"global_batch", 4}, {"steps_consumed", 0}};
  EXPECT_NO_THROW(good.get<SamplerState>());
  for (const char* field : {"seed", "num_examples", "global_batch", "steps_consumed"}) {
    nlohmann::json missing = good;
    missing.erase(field);
    EXPECT_THROW(missing.get<SamplerState>(), CheckpointError) << field;
    nlohmann::json wrong = good;
    wrong[field] = "7";
    EXPECT_THROW(wrong.get<SamplerState>(), CheckpointError) << field;
    wrong[field] = -1;
    EXPECT_THROW(wrong.get<SamplerState>(), CheckpointError) << field;
  }
  nlohmann::json zero = good;
  zero["num_examples"] = 0;
  EXPECT_THROW(zero.get<SamplerState>(), CheckpointError);
  EXPECT_THROW(nlohmann::json::array().get<SamplerState>(), CheckpointError);

  EXPECT_THROW(Sampler({.num_examples = 0}), ConfigError);
  EXPECT_THROW(Sampler({.num_examples = 5, .micro_batch = 0}), ConfigError);
  EXPECT_THROW(Sampler({.num_examples = 5, .grad_accum = 0}), ConfigError);
  EXPECT_THROW(Sampler({.num_examples = 5, .dp_size = 2, .dp_rank = 2}), ConfigError);
  EXPECT_THROW(Sampler({.num_examples = 5, .dp_size = 2, .dp_rank = -1}), ConfigError);
}

}  // namespace
}  // namespace brigade
