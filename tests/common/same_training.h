#pragma once
// Two runs of the same job in different layouts train alike: every step's loss and gradient norm
// within 1e-5 (relative), and every tensor of their final checkpoints within 1e-5 of the largest
// weight (f32 summation order is all that may differ).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "common/checkpoint_tensors.h"
#include "common/metrics_records.h"

namespace brigade::testing {

// run_a, run_b: run folders; ckpt_a, ckpt_b: their final checkpoints; steps: the runs' length.
inline void expect_same_training(const std::string& run_a, const std::string& ckpt_a,
                                 const std::string& run_b, const std::string& ckpt_b,
                                 size_t steps) {
  SCOPED_TRACE(run_a + " vs " + run_b);
  for (const char* key : {"loss", "grad_norm"}) {
    const auto la = train_series(run_a + "/metrics.jsonl", key);
    const auto lb = train_series(run_b + "/metrics.jsonl", key);
    ASSERT_EQ(la.size(), steps);
    ASSERT_EQ(lb.size(), steps);
    for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5 * la[i]) << key << i;
  }
  const auto ta = read_checkpoint(ckpt_a, CkptPart::kModel);
  const auto tb = read_checkpoint(ckpt_b, CkptPart::kModel);
  double max_abs = 0, max_diff = 0;
  for (const auto& [tensor, x] : ta) {
    ASSERT_TRUE(tb.count(tensor)) << tensor;
    const WholeTensor& y = tb.at(tensor);
    ASSERT_EQ(x.data.size(), y.data.size()) << tensor;
    for (size_t i = 0; i < x.data.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(static_cast<double>(x.data[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(x.data[i]) - y.data[i]));
    }
  }
  EXPECT_GT(max_abs, 0.5);
  EXPECT_LE(max_diff, 1e-5 * max_abs);
}

}  // namespace brigade::testing
