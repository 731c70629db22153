// Mesh communicators across 8 processes (pp=2 x dp=2 x ep=1 x tp=2): every rank builds one
// communicator per axis from the shared store, and each is checked against groups computed
// here independently from rank = ((pp*DP + dp)*EP + ep)*TP + tp.
#include <gtest/gtest.h>

#include "brigade/comm/mesh.h"
#include "comm/comm_test_util.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;

constexpr int kPP = 2, kDP = 2, kEP = 1, kTP = 2;
constexpr int kWorld = kPP * kDP * kEP * kTP;

int rank_at(int pp, int dp, int ep, int tp) {
  return ((pp * kDP + dp) * kEP + ep) * kTP + tp;
}

// World ranks of `me`'s group along axis, ordered by that axis's coordinate.
std::vector<int> expected_group(int me, MeshAxis axis) {
  for (int pp = 0; pp < kPP; ++pp)
    for (int dp = 0; dp < kDP; ++dp)
      for (int ep = 0; ep < kEP; ++ep)
        for (int tp = 0; tp < kTP; ++tp) {
          if (rank_at(pp, dp, ep, tp) != me) continue;
          std::vector<int> g;
          switch (axis) {
            case MeshAxis::kPP:
              for (int i = 0; i < kPP; ++i) g.push_back(rank_at(i, dp, ep, tp));
              break;
            case MeshAxis::kDP:
              for (int i = 0; i < kDP; ++i) g.push_back(rank_at(pp, i, ep, tp));
              break;
            case MeshAxis::kEP:
              for (int i = 0; i < kEP; ++i) g.push_back(rank_at(pp, dp, i, tp));
              break;
            case MeshAxis::kTP:
              for (int i = 0; i < kTP; ++i) g.push_back(rank_at(pp, dp, ep, i));
              break;
          }
          return g;
        }
  return {};
}

TEST(MeshMpTest, AxisCommunicatorsConnectExactlyTheirGroups) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(kWorld, 60s, [&](int rank) {
    CommOptions world;
    world.rank = rank;
    world.size = kWorld;
    world.timeout = 10s;
    world.store = std::make_shared<FileStore>(dir.path(), 10s);
    Mesh mesh(MeshShape{kPP, kDP, kEP, kTP}, world);
    mesh.init_comms();
    for (MeshAxis axis : kMeshAxes) {
      const std::vector<int> group = expected_group(rank, axis);
      Communicator& c = mesh.comm(axis);
      EXPECT_EQ(c.size(), static_cast<int>(group.size()));
      EXPECT_EQ(group[c.rank()], rank) << mesh_axis_name(axis);
      EXPECT_EQ(c.name(), mesh_axis_name(axis));
      // Gathering world ranks along the axis must return exactly the expected group, in order.
      float me = static_cast<float>(rank);
      std::vector<float> got(c.size());
      c.all_gather(&me, got.data(), 1);
      for (size_t i = 0; i < group.size(); ++i) {
        EXPECT_EQ(got[i], static_cast<float>(group[i])) << mesh_axis_name(axis) << " member " << i;
      }
      float sum = me;
      c.all_reduce(&sum, 1, ReduceOp::kSum);
      float want = 0;
      for (int g : group) want += static_cast<float>(g);
      EXPECT_EQ(sum, want) << mesh_axis_name(axis);
    }
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
