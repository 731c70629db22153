// Mesh index math against an independent enumeration of arange(world).view(pp, dp, ep, tp),
// shape validation messages, and the size-1 communicators a single process gets.
#include "brigade/comm/mesh.h"

#include <gtest/gtest.h>

#include <map>

#include "brigade/base/error.h"

namespace brigade {
namespace {

// Reference: walk the 4-d grid in row-major order, numbering cells 0, 1, 2, ...
std::map<int, MeshCoords> enumerate_grid(const MeshShape& s) {
  std::map<int, MeshCoords> out;
  int next = 0;
  for (int a = 0; a < s.pp; ++a)
    for (int b = 0; b < s.dp; ++b)
      for (int c = 0; c < s.ep; ++c)
        for (int d = 0; d < s.tp; ++d) out[next++] = MeshCoords{a, b, c, d};
  return out;
}

const MeshShape kShapes[] = {{1, 1, 1, 1}, {1, 8, 1, 1}, {1, 1, 1, 8}, {2, 2, 1, 2},
                             {2, 3, 1, 2}, {3, 1, 2, 2}, {2, 2, 2, 2}, {1, 4, 2, 1}};

TEST(MeshTest, CoordinatesMatchRowMajorGridWithTpFastest) {
  for (const MeshShape& s : kShapes) {
    const int world = static_cast<int>(s.product());
    Mesh mesh(s, world, 0);
    auto grid = enumerate_grid(s);
    for (const auto& [rank, coords] : grid) {
      EXPECT_EQ(mesh.coords_of(rank), coords) << s.to_string() << " rank " << rank;
      EXPECT_EQ(mesh.rank_of(coords), rank) << s.to_string();
    }
  }
}

TEST(MeshTest, GroupsAreRanksDifferingOnlyAlongTheAxis) {
  for (const MeshShape& s : kShapes) {
    const int world = static_cast<int>(s.product());
    auto grid = enumerate_grid(s);
    for (int me = 0; me < world; ++me) {
      Mesh mesh(s, world, me);
      for (MeshAxis axis : kMeshAxes) {
        const int a = static_cast<int>(axis);
        // Reference group: brute force over all ranks, ordered by the axis coordinate.
        std::vector<int> expected(s.extent(axis), -1);
        for (const auto& [r, c] : grid) {
          bool same = true;
          for (int k = 0; k < kNumMeshAxes; ++k) same = same && (k == a || c[k] == grid[me][k]);
          if (same) expected[c[a]] = r;
        }
        EXPECT_EQ(mesh.group_ranks(axis), expected)
            << s.to_string() << " rank " << me << " axis " << mesh_axis_name(axis);
        EXPECT_EQ(mesh.group_ranks(axis)[mesh.coord(axis)], me);
      }
    }
  }
}

TEST(MeshTest, TpNeighboursAreAdjacentRanks) {
  Mesh mesh({2, 2, 1, 2}, 8, 5);  // rank 5 = (pp 1, dp 0, ep 0, tp 1)
  EXPECT_EQ(mesh.coords_of(5), (MeshCoords{1, 0, 0, 1}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::kTP), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::kDP), (std::vector<int>{5, 7}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::kPP), (std::vector<int>{1, 5}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::kEP), (std::vector<int>{5}));
}

TEST(MeshTest, WrongProductPrintsEveryFactor) {
  try {
    Mesh mesh({2, 3, 1, 2}, 8, 0);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pp=2 x dp=3 x ep=1 x tp=2 = 12 != world size 8"),
              std::string::npos)
        << e.what();
  }
}

TEST(MeshTest, RejectsZeroFactorAndBadRank) {
  EXPECT_THROW(Mesh({0, 1, 1, 1}, 0, 0), ConfigError);
  EXPECT_THROW(Mesh({1, 2, 1, 1}, 2, 2), ConfigError);
  EXPECT_THROW(Mesh({1, 2, 1, 1}, 2, -1), ConfigError);
}

TEST(MeshTest, CommWithoutOptionsIsAConfigError) {
  Mesh mesh({1, 1, 1, 1}, 1, 0);
  EXPECT_THROW(mesh.comm(MeshAxis::kDP), ConfigError);
}

TEST(MeshTest, SingleProcessMeshGetsWorkingSizeOneCommunicators) {
  CommOptions world;  // rank 0 of 1: no store needed
  Mesh mesh({1, 1, 1, 1}, world);
  mesh.init_comms();
  for (MeshAxis axis : kMeshAxes) {
    Communicator& c = mesh.comm(axis);
    EXPECT_EQ(c.size(), 1);
    EXPECT_EQ(c.rank(), 0);
    EXPECT_EQ(c.name(), mesh_axis_name(axis));
    std::vector<float> v = {1.5f, -2.0f, 3.25f};
    c.all_reduce(v.data(), 3, ReduceOp::kAvg);
    EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f, 3.25f}));
    EXPECT_EQ(c.stats().total().bytes_sent, 0);
    EXPECT_EQ(c.stats().get(OpKind::kAllReduce).calls, 1);
  }
  EXPECT_EQ(&mesh.comm(MeshAxis::kTP), &mesh.comm(MeshAxis::kTP));  // created once
}

}  // namespace
}  // namespace brigade
