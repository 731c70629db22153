#pragma once
// A small 4-rank layout for sharded checkpoint tests, mixing every way a layout cuts tensors
// (mesh dp=2 x tp=2):
//   "h.0.mlp.w"  (6, 10)    column boxes over tp, replicated over dp (written by ranks 0, 1)
//   "h.0.ln.b"   (10,)      replicated on every rank (written by rank 0)
//   "emb"        (4, 6, 5)  one row (dim 0) per rank
//   "w_flat"     (7, 9)     ZeRO-like flat ranges that cut rows in the middle
//   "adam.m"     (137,)     uneven flat ranges
//   "scale"      ()         a scalar, rank 0 only
//   "dense.w"    (13, 100, 210) replicated on every rank and over 1 MiB, so the plan splits
//                           its writing into one block of dim 0 per rank (3, 3, 3, 4 rows)
// Values are a closed-form function of (tensor, global flat index, step), so any region of any
// tensor has an independent reference, and each rank fills its pieces element by element from
// the multi-index (not through the region code under test).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "brigade/ckpt/shard_plan.h"
#include "brigade/tensor/rng.h"

namespace brigade::testing {

inline float ref_value(const std::string& tensor, int64_t flat, int64_t step) {
  const uint64_t h = hash_name(tensor) % 1000;
  return static_cast<float>(std::sin(0.37 * static_cast<double>(flat) + 0.001 * h) * 10.0 +
                            static_cast<double>(step));
}

struct TestTensor {
  std::string name;
  std::vector<int64_t> shape;
};

inline std::vector<TestTensor> test_tensors() {
  return {{"h.0.mlp.w", {6, 10}},     {"h.0.ln.b", {10}}, {"emb", {4, 6, 5}},
          {"w_flat", {7, 9}},         {"adam.m", {137}},  {"scale", {}},
          {"dense.w", {13, 100, 210}}};
}

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The pieces rank r of 4 holds.
inline std::vector<ShardPiece> test_pieces(int r) {
  auto p = [](std::string n, std::vector<int64_t> s, Region g) {
    return ShardPiece{std::move(n), std::move(s), StDtype::kF32, std::move(g)};
  };
  const int tp = r % 2;
  const auto cut = [](int64_t n, int r) { return std::pair(n * r / 4, n * (r + 1) / 4); };
  std::vector<ShardPiece> out = {
      p("h.0.mlp.w", {6, 10}, Region::box({0, 5 * tp}, {6, 5})),
      p("h.0.ln.b", {10}, Region::whole({10})),
      p("emb", {4, 6, 5}, Region::box({r, 0, 0}, {1, 6, 5})),
      p("w_flat", {7, 9}, Region::range(cut(63, r).first, cut(63, r).second)),
      p("adam.m", {137}, Region::range(cut(137, r).first, cut(137, r).second)),
      p("dense.w", {13, 100, 210}, Region::whole({13, 100, 210})),
  };
  if (r == 0) out.push_back(p("scale", {}, Region::whole({})));
  return out;
}

// Reference values of `region` of a tensor, in storage order, computed element by element:
// walk every multi-index of the view in row-major order and keep those inside the region.
inline std::vector<float> ref_region(const std::string& tensor, const std::vector<int64_t>& shape,
                                     const Region& region, int64_t step) {
  std::vector<float> out;
  const int64_t n = numel_of(shape);
  const std::vector<int64_t> view = region.flat ? std::vector<int64_t>{n} : shape;
  for (int64_t f = 0; f < n; ++f) {
    bool in = true;
    int64_t rest = f;
    for (size_t i = view.size(); i-- > 0;) {
      const int64_t idx = rest % view[i];
      rest /= view[i];
      in = in && idx >= region.start[i] && idx < region.start[i] + region.count[i];
    }
    if (in) out.push_back(ref_value(tensor, f, step));
  }
  return out;
}

}  // namespace brigade::testing
