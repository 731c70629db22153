#pragma once
// A small fake training state for checkpoint tests: a few tensors in two files plus a JSON
// state, all derived from the step so that different checkpoints hold different values.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/ckpt/checkpoint.h"
#include "brigade/tensor/rng.h"

namespace brigade::testing {

struct FakeTensor {
  std::string file;
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

inline std::vector<FakeTensor> fake_tensors(int64_t step) {
  std::vector<FakeTensor> ts = {
      {"model.safetensors", "wte.weight", {50, 16}, {}},
      {"model.safetensors", "h.0.ln_1.bias", {16}, {}},
      {"model.safetensors", "h.0.mlp.c_fc.weight", {64, 16}, {}},
      {"optim.safetensors", "adam.m", {1920}, {}},
      {"optim.safetensors", "adam.v", {1920}, {}},
  };
  for (FakeTensor& t : ts) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.values.resize(static_cast<size_t>(n));
    fill_normal(t.values.data(), n, 0.0f, 1.0f, static_cast<uint64_t>(step), hash_name(t.name));
  }
  return ts;
}

inline nlohmann::json fake_state(int64_t step) {
  return {{"config", {{"model", "gpt2-tiny"}, {"lr", 3e-4}, {"layers", 2}}},
          {"sampler", {{"epoch", 1}, {"position", 1000 + step}}},
          {"rng", {{"seed", 1234}, {"counter", step * 7}}},
          {"provenance", {{"git", "abc123"}, {"note", "ünïcode ok"}}}};
}

// Writes every fake tensor of `step` (grouped by file) and commits.
inline std::string save_fake(const std::string& root, int64_t step, int keep_last = 3) {
  const std::vector<FakeTensor> ts = fake_tensors(step);
  CheckpointWriter w(root, step, CheckpointOptions{.keep_last = keep_last});
  for (const std::string file : {"model.safetensors", "optim.safetensors"}) {
    std::vector<TensorRef> refs;
    for (const FakeTensor& t : ts) {
      if (t.file == file) refs.push_back({t.name, t.shape, t.values.data()});
    }
    w.add_file(file, refs);
  }
  return w.commit(fake_state(step));
}

// Expects the reader to hold exactly the tensors and state of `step`, bit for bit.
inline void expect_holds_step(const CheckpointReader& r, int64_t step) {
  EXPECT_EQ(r.step(), step);
  EXPECT_EQ(r.state(), fake_state(step));
  for (const FakeTensor& t : fake_tensors(step)) {
    std::vector<float> out(t.values.size(), -1.0f);
    r.read(t.file, t.name, out.data(), t.shape);
    EXPECT_EQ(std::memcmp(out.data(), t.values.data(), out.size() * 4), 0) << t.name;
  }
}

}  // namespace brigade::testing
