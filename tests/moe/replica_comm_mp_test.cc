// The dp x ep replica group of the mesh (comm/mesh.h: group_ranks_over, replica_comm), over
// which dense gradients are averaged under expert parallelism: its ranks against a brute-force
// enumeration of the grid, and a real all-reduce over it with a closed-form sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "brigade/comm/file_store.h"
#include "brigade/comm/mesh.h"
#include "comm/multiprocess.h"

namespace brigade {
namespace {

using namespace std::chrono_literals;

// Every rank whose coordinates equal `rank`'s on the axes not listed, in rank order.
std::vector<int> brute_force(const Mesh& mesh, int rank, std::vector<MeshAxis> axes) {
  const MeshCoords me = mesh.coords_of(rank);
  std::vector<int> out;
  for (int r = 0; r < mesh.world_size(); ++r) {
    const MeshCoords c = mesh.coords_of(r);
    bool same = true;
    for (int a = 0; a < kNumMeshAxes; ++a) {
      const bool listed =
          std::find(axes.begin(), axes.end(), static_cast<MeshAxis>(a)) != axes.end();
      if (!listed && c[a] != me[a]) same = false;
    }
    if (same) out.push_back(r);
  }
  return out;
}

TEST(ReplicaGroup, RanksSpanDpAndEp) {
  const Mesh mesh(MeshShape{.pp = 2, .dp = 3, .ep = 2, .tp = 2}, 24, 0);
  for (int r = 0; r < 24; ++r) {
    EXPECT_EQ(mesh.group_ranks_over({MeshAxis::kDP, MeshAxis::kEP}, r),
              brute_force(mesh, r, {MeshAxis::kDP, MeshAxis::kEP}))
        << "rank " << r;
    // One axis: the axis group itself.
    EXPECT_EQ(mesh.group_ranks_over({MeshAxis::kEP}, r), mesh.group_ranks(MeshAxis::kEP, r));
    EXPECT_EQ(mesh.group_ranks_over({MeshAxis::kPP, MeshAxis::kTP}, r),
              brute_force(mesh, r, {MeshAxis::kPP, MeshAxis::kTP}));
  }
  // Rank 13 = (pp 1, dp 0, ep 0, tp 1): the dp x ep group varies dp and ep only, ep fastest.
  EXPECT_EQ(mesh.group_ranks_over({MeshAxis::kDP, MeshAxis::kEP}, 13),
            (std::vector<int>{13, 15, 17, 19, 21, 23}));
}

TEST(ReplicaGroup, AllReduceOverDpTimesEp) {
  // dp = 2 x ep = 2 x tp = 2: two replica groups of 4 (the even and the odd ranks).
  testutil::TempDir dir;
  auto result = testutil::run_ranks(8, 60s, [&](int rank) {
    CommOptions w;
    w.rank = rank;
    w.size = 8;
    w.timeout = 20s;
    w.store = std::make_shared<FileStore>(dir.path(), 20s);
    Mesh mesh(MeshShape{.dp = 2, .ep = 2, .tp = 2}, w);
    Communicator& replicas = mesh.replica_comm();
    EXPECT_EQ(&mesh.replica_comm(), &replicas) << "created once";
    ASSERT_EQ(replicas.size(), 4);
    EXPECT_EQ(replicas.rank(), mesh.coord(MeshAxis::kDP) * 2 + mesh.coord(MeshAxis::kEP));
    float v = static_cast<float>(rank);
    replicas.all_reduce(&v, 1, ReduceOp::kSum);
    const int tp = mesh.coord(MeshAxis::kTP);
    EXPECT_EQ(v, static_cast<float>(0 + 2 + 4 + 6 + 4 * tp));  // ranks tp, tp+2, tp+4, tp+6
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

TEST(ReplicaGroup, WithoutEpItIsTheDpGroup) {
  testutil::TempDir dir;
  auto result = testutil::run_ranks(2, 60s, [&](int rank) {
    CommOptions w;
    w.rank = rank;
    w.size = 2;
    w.timeout = 20s;
    w.store = std::make_shared<FileStore>(dir.path(), 20s);
    Mesh mesh(MeshShape{.dp = 2}, w);
    EXPECT_EQ(&mesh.replica_comm(), &mesh.comm(MeshAxis::kDP));
  });
  EXPECT_TRUE(testutil::AllRanksOk(result));
}

}  // namespace
}  // namespace brigade
