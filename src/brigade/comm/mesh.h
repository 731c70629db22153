#pragma once
// Mesh: the world's ranks arranged in a grid with named axes in the fixed order
// (pp, dp, ep, tp), tp varying fastest, exactly like arange(world).view(pp, dp, ep, tp):
//   rank = ((pp_i * dp + dp_i) * ep + ep_i) * tp + tp_i
// Tensor-parallel peers are therefore adjacent ranks (same machine first), pipeline stages the
// farthest apart. A rank's group along an axis is the ranks that differ from it only in that
// axis's coordinate, ordered by that coordinate (so a rank's index in its group is its coord).
// Every group is derived here, in one place.
#include <array>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/communicator.h"

namespace brigade {

enum class MeshAxis : int { kPP = 0, kDP = 1, kEP = 2, kTP = 3 };
inline constexpr int kNumMeshAxes = 4;
inline constexpr std::array<MeshAxis, kNumMeshAxes> kMeshAxes = {MeshAxis::kPP, MeshAxis::kDP,
                                                                 MeshAxis::kEP, MeshAxis::kTP};
// "pp", "dp", "ep", "tp".
const char* mesh_axis_name(MeshAxis axis);

struct MeshShape {
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int tp = 1;

  int extent(MeshAxis axis) const;
  int64_t product() const { return int64_t{pp} * dp * ep * tp; }
  // "pp=2 x dp=3 x ep=1 x tp=2"
  std::string to_string() const;
};

// Coordinates of a rank, indexed by MeshAxis.
using MeshCoords = std::array<int, kNumMeshAxes>;

class Mesh {
 public:
  // Throws ConfigError if a factor is < 1, if the product differs from world_size (printing
  // every factor: "pp=2 x dp=3 x ep=1 x tp=2 = 12 != world size 8"), or if rank is out of range.
  Mesh(const MeshShape& shape, int world_size, int rank);
  // Same, taking world size and rank from world_options, which are also kept to build the
  // per-axis communicators on demand (comm()).
  Mesh(const MeshShape& shape, const CommOptions& world_options);

  const MeshShape& shape() const { return shape_; }
  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  int extent(MeshAxis axis) const { return shape_.extent(axis); }

  MeshCoords coords_of(int rank) const;
  int rank_of(const MeshCoords& coords) const;
  // This rank's coordinate along axis.
  int coord(MeshAxis axis) const { return coords_of(rank_)[static_cast<int>(axis)]; }

  // Ranks of `rank`'s group along axis, ordered by that axis's coordinate.
  std::vector<int> group_ranks(MeshAxis axis, int rank) const;
  std::vector<int> group_ranks(MeshAxis axis) const { return group_ranks(axis, rank_); }
  // Ranks of `rank`'s group spanning several axes: those that differ from it only in the listed
  // axes' coordinates, in increasing rank order (the listed coordinates in mesh order, the later
  // axis fastest).
  std::vector<int> group_ranks_over(std::initializer_list<MeshAxis> axes, int rank) const;

  // This rank's communicator along axis (size extent(axis), rank coord(axis), name "dp" etc.),
  // created on first use through create_subgroup(). Creating it is collective over the group,
  // so call comm() for the axes in the same order on every rank, or call init_comms() once.
  // Throws ConfigError if the mesh was built without CommOptions.
  Communicator& comm(MeshAxis axis);
  // Creates every axis communicator in the fixed order pp, dp, ep, tp.
  void init_comms();

  // The data replicas of this rank's dense parameters: the dp x ep group (same pp stage, same tp
  // shard; group_ranks_over({kDP, kEP})), size dp * ep, name "dp_ep". "ep is carved out of dp":
  // its ranks all see different data, so dense gradients are averaged over it, while expert
  // gradients, whose experts differ along ep, are averaged over comm(kDP) only. With ep = 1 it is
  // comm(kDP) itself. Created on first use, collective over the group (like comm()).
  Communicator& replica_comm();

 private:
  void validate() const;

  MeshShape shape_;
  int world_size_;
  int rank_;
  std::optional<CommOptions> options_;
  std::array<std::unique_ptr<Communicator>, kNumMeshAxes> comms_;
  std::unique_ptr<Communicator> replica_comm_;  // dp x ep, only when ep > 1
};

}  // namespace brigade
