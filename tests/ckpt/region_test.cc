// Regions, their flat runs and overlaps, checked against brute force: every element of a small
// tensor is tested for membership by its multi-index, and its storage offset counted by hand.
#include "brigade/ckpt/region.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/ckpt/shard_plan.h"

namespace brigade {
namespace {

// Storage offset of flat index f inside region r, or -1 if f is not in r (brute force).
std::vector<int64_t> naive_offsets(const Region& r, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<int64_t> out(static_cast<size_t>(numel), -1);
  int64_t next = 0;
  for (int64_t f = 0; f < numel; ++f) {
    bool in;
    if (r.flat) {
      in = f >= r.start[0] && f < r.start[0] + r.count[0];
    } else {
      in = true;
      int64_t rest = f;
      for (size_t i = shape.size(); i-- > 0;) {
        const int64_t idx = rest % shape[i];
        rest /= shape[i];
        in = in && idx >= r.start[i] && idx < r.start[i] + r.count[i];
      }
    }
    if (in) out[static_cast<size_t>(f)] = next++;
  }
  return out;
}

Region random_region(std::mt19937& rng, const std::vector<int64_t>& shape) {
  auto pick = [&](int64_t n, int64_t* start, int64_t* count) {
    std::uniform_int_distribution<int64_t> d(0, n);
    int64_t a = d(rng), b = d(rng);
    if (a > b) std::swap(a, b);
    *start = a;
    *count = b - a;
  };
  Region r;
  if (rng() % 3 == 0) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    int64_t s, c;
    pick(numel, &s, &c);
    return Region::range(s, s + c);
  }
  r.start.resize(shape.size());
  r.count.resize(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (rng() % 3 == 0) {  // often full along a dimension, to exercise run merging
      r.start[i] = 0;
      r.count[i] = shape[i];
    } else {
      pick(shape[i], &r.start[i], &r.count[i]);
    }
  }
  return r;
}

TEST(Region, RunsMatchBruteForce) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int64_t>> shapes = {{13}, {5, 7}, {3, 4, 5}, {2, 3, 2, 4}};
  for (const auto& shape : shapes) {
    for (int trial = 0; trial < 200; ++trial) {
      const Region r = random_region(rng, shape);
      ASSERT_FALSE(region_error(r, shape)) << r.to_string();
      const std::vector<int64_t> naive = naive_offsets(r, shape);
      std::vector<int64_t> got(naive.size(), -1);
      int64_t pos = 0;
      int64_t prev_end = -1;
      for (const FlatRun& run : region_runs(r, shape)) {
        EXPECT_LT(run.begin, run.end);
        EXPECT_NE(run.begin, prev_end) << "adjacent runs not merged";
        EXPECT_GT(run.begin, prev_end - 1);
        prev_end = run.end;
        for (int64_t f = run.begin; f < run.end; ++f) got[static_cast<size_t>(f)] = pos++;
      }
      EXPECT_EQ(got, naive) << r.to_string();
      EXPECT_EQ(pos, r.numel());
      EXPECT_EQ(region_run_count(r, shape), static_cast<int64_t>(region_runs(r, shape).size()))
          << r.to_string();
    }
  }
}

TEST(Region, OverlapMatchesBruteForce) {
  std::mt19937 rng(11);
  const std::vector<std::vector<int64_t>> shapes = {{17}, {6, 5}, {3, 4, 5}};
  for (const auto& shape : shapes) {
    for (int trial = 0; trial < 300; ++trial) {
      const Region a = random_region(rng, shape), b = random_region(rng, shape);
      const std::vector<int64_t> na = naive_offsets(a, shape), nb = naive_offsets(b, shape);
      // Expected: every common element, as (offset in a, offset in b) pairs in flat order.
      std::vector<std::pair<int64_t, int64_t>> expected, got;
      for (size_t f = 0; f < na.size(); ++f) {
        if (na[f] >= 0 && nb[f] >= 0) expected.emplace_back(na[f], nb[f]);
      }
      for (const RegionOverlap& o : region_overlap(a, b, shape)) {
        for (int64_t k = 0; k < o.length; ++k) got.emplace_back(o.a_offset + k, o.b_offset + k);
      }
      EXPECT_EQ(got, expected) << a.to_string() << " vs " << b.to_string();
    }
  }
}

TEST(Region, ScalarAndEmpty) {
  EXPECT_EQ(region_runs(Region::whole({}), {}).size(), 1u);
  EXPECT_EQ(Region::whole({}).numel(), 1);
  EXPECT_TRUE(region_runs(Region::box({0, 0}, {0, 3}), {2, 3}).empty());
  EXPECT_TRUE(region_overlap(Region::range(0, 3), Region::range(3, 6), {6}).empty());
}

TEST(Region, ErrorsNameTheProblem) {
  EXPECT_TRUE(region_error(Region::box({0, 4}, {2, 3}), {2, 6}).has_value());  // 4 + 3 > 6
  EXPECT_TRUE(region_error(Region::box({0}, {2}), {2, 6}).has_value());        // rank mismatch
  EXPECT_TRUE(region_error(Region::range(5, 13), {3, 4}).has_value());         // 13 > 12
  EXPECT_TRUE(region_error(Region::box({-1, 0}, {1, 1}), {2, 2}).has_value());
  EXPECT_FALSE(region_error(Region::range(5, 12), {3, 4}).has_value());
}

ShardPiece piece(std::string name, std::vector<int64_t> shape, Region r) {
  return ShardPiece{std::move(name), std::move(shape), StDtype::kF32, std::move(r)};
}

TEST(ShardPlan, ReplicatedPiecesAreWrittenOnceByTheLowestRank) {
  // dp=2 x tp=2: "w" split by columns over tp, replicated over dp; "b" replicated everywhere.
  std::vector<std::vector<ShardPiece>> all(4);
  for (int r = 0; r < 4; ++r) {
    const int tp = r % 2;
    all[r] = {piece("b", {4}, Region::whole({4})),
              piece("w", {3, 4}, Region::box({0, 2 * tp}, {3, 2}))};
  }
  const ShardPlan p0 = ShardPlan::from_all(0, all), p1 = ShardPlan::from_all(1, all);
  const ShardPlan p2 = ShardPlan::from_all(2, all), p3 = ShardPlan::from_all(3, all);
  EXPECT_EQ(p0.written().size(), 2u);  // b and its w half
  EXPECT_EQ(p1.written().size(), 1u);  // its w half
  EXPECT_TRUE(p2.written().empty());
  EXPECT_TRUE(p2.file_name().empty());
  EXPECT_TRUE(p3.written().empty());
  EXPECT_EQ(p0.bytes_to_write(), (4 + 6) * 4);
  EXPECT_EQ(p0.index().tensors.at("w").pieces.size(), 2u);
  EXPECT_EQ(p0.index().tensors.at("w").pieces[1].file, "rank_00001.safetensors");
  EXPECT_EQ(p0.index().to_json(), p3.index().to_json());  // every rank decides the same
}

TEST(ShardPlan, LargeReplicatedPiecesAreSplitAmongTheirHolders) {
  // dp=3 x tp=2 with a split threshold of 32 bytes: "w" (7, 8) column halves (28 floats,
  // 112 B) are each held by 3 dp ranks -> one block of rows per holder; "m" (10,) flat,
  // held by all 6 -> 6 ranges; "b" (2,) is under the threshold -> lowest holder; "r" (2, 40)
  // has 2 rows for 6 holders -> only 2 write.
  std::vector<std::vector<ShardPiece>> all(6);
  for (int r = 0; r < 6; ++r) {
    const int tp = r % 2;
    all[r] = {piece("w", {7, 8}, Region::box({0, 4 * tp}, {7, 4})),
              piece("m", {10}, Region::range(0, 10)), piece("b", {2}, Region::whole({2})),
              piece("r", {2, 40}, Region::whole({2, 40}))};
  }
  std::vector<ShardPlan> plans;
  for (int r = 0; r < 6; ++r) plans.push_back(ShardPlan::from_all(r, all, {}, 32));
  // Column half tp=1 is held by ranks 1, 3, 5: rows [0,2), [2,4), [4,7).
  const auto& w = plans[0].index().tensors.at("w").pieces;
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[3].rank, 1);
  EXPECT_EQ(w[3].region, Region::box({0, 4}, {2, 4}));
  EXPECT_EQ(w[5].rank, 5);
  EXPECT_EQ(w[5].region, Region::box({4, 4}, {3, 4}));
  // What rank r writes of its piece i (each rank writes at most one part of a piece).
  const auto written = [&](int r, size_t i) {
    for (const ShardPlan::Written& w : plans[r].written()) {
      if (w.piece == i) return w;
    }
    ADD_FAILURE() << "rank " << r << " writes nothing of piece " << i;
    return ShardPlan::Written{};
  };
  // Rank 5 writes rows 4..6 of its w half: byte offset 4 rows x 4 columns x 4 bytes.
  EXPECT_EQ(written(5, 0).offset, 4 * 4 * 4);
  EXPECT_EQ(written(5, 0).nbytes, 3 * 4 * 4);
  EXPECT_EQ(written(5, 0).region, Region::box({4, 4}, {3, 4}));
  // m: ranks 0..5 write [0,1), [1,3), [3,5), [5,6), [6,8), [8,10).
  const auto& m = plans[0].index().tensors.at("m").pieces;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].region, Region::range(1, 3));
  EXPECT_EQ(written(3, 1).offset, 5 * 4);
  EXPECT_EQ(written(3, 1).nbytes, 1 * 4);
  EXPECT_EQ(plans[0].index().tensors.at("b").pieces.size(), 1u);
  const auto& rr = plans[0].index().tensors.at("r").pieces;
  ASSERT_EQ(rr.size(), 2u);
  EXPECT_EQ(rr[1].rank, 1);
  EXPECT_EQ(rr[1].region, Region::box({1, 0}, {1, 40}));
  EXPECT_EQ(plans[2].written().size(), 2u);  // its w block and its m range
  for (int r = 1; r < 6; ++r) EXPECT_EQ(plans[r].index().to_json(), plans[0].index().to_json());
  // The default threshold (1 MiB) leaves all of this to the lowest holders.
  EXPECT_EQ(ShardPlan::from_all(0, all).index().tensors.at("m").pieces.size(), 1u);
}

TEST(ShardPlan, RejectsInconsistentOrIncompleteLayouts) {
  // Shapes disagree.
  std::vector<std::vector<ShardPiece>> shapes = {{piece("w", {4}, Region::range(0, 2))},
                                                 {piece("w", {5}, Region::range(2, 5))}};
  try {
    ShardPlan::from_all(0, shapes);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  // A gap: element 2 of 4 in no piece.
  std::vector<std::vector<ShardPiece>> gap = {{piece("w", {4}, Region::range(0, 2))},
                                              {piece("w", {4}, Region::range(3, 4))}};
  EXPECT_THROW(ShardPlan::from_all(0, gap), ConfigError);
  // Overlap that is not an identical replica.
  std::vector<std::vector<ShardPiece>> overlap = {{piece("w", {4}, Region::range(0, 3))},
                                                  {piece("w", {4}, Region::range(2, 4))}};
  EXPECT_THROW(ShardPlan::from_all(0, overlap), ConfigError);
  // A flat range and a box of the same elements tile it too (mixed representations).
  std::vector<std::vector<ShardPiece>> mixed = {{piece("w", {2, 3}, Region::range(0, 3))},
                                                {piece("w", {2, 3}, Region::box({1, 0}, {1, 3}))}};
  EXPECT_NO_THROW(ShardPlan::from_all(0, mixed));
}

}  // namespace
}  // namespace brigade
