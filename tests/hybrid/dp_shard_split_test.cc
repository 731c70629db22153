// split_whole_tensors (parallel/dp_shard_update.h): the ZeRO split of a chunk over dp, checked
// against its contract on layouts built by hand: bounds at tensor edges, covering the chunk in
// order, and each part within one tensor of the ideal share (the greedy cut puts every bound
// within half the largest tensor of its ideal position).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "brigade/parallel/dp_shard_update.h"

namespace brigade {
namespace {

ParamLayout layout_of(const std::vector<int64_t>& sizes) {
  ParamLayout l;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamSpec spec;
    spec.name = std::to_string(i);
    spec.shape = {sizes[i]};
    l.add(std::move(spec));
  }
  return l;
}

void expect_valid_split(const std::vector<int64_t>& sizes, int parts) {
  const ParamLayout l = layout_of(sizes);
  const std::vector<int64_t> b = split_whole_tensors(l, parts);
  ASSERT_EQ(b.size(), static_cast<size_t>(parts + 1));
  EXPECT_EQ(b.front(), 0);
  EXPECT_EQ(b.back(), l.total());
  std::set<int64_t> edges = {0};
  int64_t at = 0, largest = 0;
  for (int64_t s : sizes) edges.insert(at += s), largest = std::max(largest, s);
  for (int r = 0; r < parts; ++r) {
    EXPECT_LE(b[r], b[r + 1]) << "part " << r;
    EXPECT_TRUE(edges.count(b[r + 1])) << b[r + 1] << " is not a tensor edge";
    // Each bound within largest / 2 of its ideal r * total / parts, so a part exceeds its
    // share by at most one largest tensor.
    EXPECT_LE(static_cast<double>(b[r + 1] - b[r]),
              static_cast<double>(l.total()) / parts + static_cast<double>(largest))
        << "part " << r;
  }
}

TEST(DpShardSplit, EqualTensorsSplitEvenly) {
  const std::vector<int64_t> b = split_whole_tensors(layout_of({10, 10, 10, 10}), 2);
  EXPECT_EQ(b, (std::vector<int64_t>{0, 20, 40}));
  EXPECT_EQ(split_whole_tensors(layout_of({10, 10, 10, 10}), 4),
            (std::vector<int64_t>{0, 10, 20, 30, 40}));
  EXPECT_EQ(split_whole_tensors(layout_of({7, 3}), 1), (std::vector<int64_t>{0, 10}));
}

TEST(DpShardSplit, OneLargeTensorTakesAPartOfItsOwn) {
  // 100 of 130 floats in one tensor: the cut nearest 65 is after it (100) rather than before
  // (10): |100 - 65| = 35 < 55.
  EXPECT_EQ(split_whole_tensors(layout_of({10, 100, 20}), 2), (std::vector<int64_t>{0, 110, 130}));
}

TEST(DpShardSplit, MoreRanksThanTensorsLeavesEmptyParts) {
  const std::vector<int64_t> b = split_whole_tensors(layout_of({5, 5}), 4);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b.front(), 0);
  EXPECT_EQ(b.back(), 10);
  for (size_t i = 0; i + 1 < b.size(); ++i) EXPECT_LE(b[i], b[i + 1]);
}

TEST(DpShardSplit, GptLikeLayoutsMeetTheContract) {
  // A GPT block's sizes (d = 32): ln, c_attn w/b, c_proj w/b, ln, c_fc w/b, c_proj w/b.
  const std::vector<int64_t> block = {32, 32, 3072, 96, 1024, 32, 32, 32, 4096, 128, 4096, 32};
  std::vector<int64_t> chunk = {8192, 512};
  for (int i = 0; i < 4; ++i) chunk.insert(chunk.end(), block.begin(), block.end());
  for (int parts : {1, 2, 3, 4, 8, 16, 64}) expect_valid_split(chunk, parts);
  expect_valid_split({1, 1000000, 1}, 3);
}

}  // namespace
}  // namespace brigade
