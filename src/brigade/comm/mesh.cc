#include "brigade/comm/mesh.h"

#include "brigade/base/check.h"
#include "brigade/base/error.h"

namespace brigade {

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPP:
      return "pp";
    case MeshAxis::kDP:
      return "dp";
    case MeshAxis::kEP:
      return "ep";
    case MeshAxis::kTP:
      return "tp";
  }
  return "?";
}

int MeshShape::extent(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::kPP:
      return pp;
    case MeshAxis::kDP:
      return dp;
    case MeshAxis::kEP:
      return ep;
    case MeshAxis::kTP:
      return tp;
  }
  return 0;
}

std::string MeshShape::to_string() const {
  return "pp=" + std::to_string(pp) + " x dp=" + std::to_string(dp) +
         " x ep=" + std::to_string(ep) + " x tp=" + std::to_string(tp);
}

Mesh::Mesh(const MeshShape& shape, int world_size, int rank)
    : shape_(shape), world_size_(world_size), rank_(rank) {
  validate();
}

Mesh::Mesh(const MeshShape& shape, const CommOptions& world_options)
    : shape_(shape),
      world_size_(world_options.size),
      rank_(world_options.rank),
      options_(world_options) {
  validate();
  options_->validate();
}

void Mesh::validate() const {
  for (MeshAxis a : kMeshAxes) {
    if (shape_.extent(a) < 1) {
      throw ConfigError(std::string("mesh: ") + mesh_axis_name(a) + " must be >= 1, got " +
                        std::to_string(shape_.extent(a)) + " (" + shape_.to_string() + ")");
    }
  }
  if (shape_.product() != world_size_) {
    throw ConfigError("mesh: " + shape_.to_string() + " = " + std::to_string(shape_.product()) +
                      " != world size " + std::to_string(world_size_));
  }
  if (rank_ < 0 || rank_ >= world_size_) {
    throw ConfigError("mesh: rank " + std::to_string(rank_) + " outside world of size " +
                      std::to_string(world_size_));
  }
}

MeshCoords Mesh::coords_of(int rank) const {
  BRIGADE_CHECK(rank >= 0 && rank < world_size_) << "rank " << rank << " world " << world_size_;
  MeshCoords c{};
  int rest = rank;
  for (int a = kNumMeshAxes - 1; a >= 0; --a) {  // tp is the fastest-varying digit
    const int e = shape_.extent(static_cast<MeshAxis>(a));
    c[a] = rest % e;
    rest /= e;
  }
  return c;
}

int Mesh::rank_of(const MeshCoords& coords) const {
  int rank = 0;
  for (int a = 0; a < kNumMeshAxes; ++a) {
    const int e = shape_.extent(static_cast<MeshAxis>(a));
    BRIGADE_CHECK(coords[a] >= 0 && coords[a] < e)
        << mesh_axis_name(static_cast<MeshAxis>(a)) << " coordinate " << coords[a] << " of " << e;
    rank = rank * e + coords[a];
  }
  return rank;
}

std::vector<int> Mesh::group_ranks(MeshAxis axis, int rank) const {
  MeshCoords c = coords_of(rank);
  std::vector<int> ranks;
  const int e = shape_.extent(axis);
  ranks.reserve(e);
  for (int i = 0; i < e; ++i) {
    c[static_cast<int>(axis)] = i;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

std::vector<int> Mesh::group_ranks_over(std::initializer_list<MeshAxis> axes, int rank) const {
  // Enumerate the listed axes' coordinates as the digits of a counter, the later axis (in mesh
  // order) fastest; rank_of is increasing in each coordinate, so the ranks come out sorted.
  bool listed[kNumMeshAxes] = {};
  for (MeshAxis a : axes) listed[static_cast<int>(a)] = true;
  MeshCoords c = coords_of(rank);
  int size = 1;
  for (int a = 0; a < kNumMeshAxes; ++a) {
    if (!listed[a]) continue;
    c[a] = 0;
    size *= shape_.extent(static_cast<MeshAxis>(a));
  }
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) {
    int rest = i;
    for (int a = kNumMeshAxes - 1; a >= 0; --a) {
      if (!listed[a]) continue;
      const int e = shape_.extent(static_cast<MeshAxis>(a));
      c[a] = rest % e;
      rest /= e;
    }
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

Communicator& Mesh::comm(MeshAxis axis) {
  auto& slot = comms_[static_cast<int>(axis)];
  if (!slot) {
    if (!options_) {
      throw ConfigError(std::string("mesh: no communicator options were given, so the ") +
                        mesh_axis_name(axis) + " communicator cannot be created");
    }
    std::vector<int> ranks = group_ranks(axis);
    slot = create_subgroup(*options_, ranks, mesh_axis_name(axis));
  }
  return *slot;
}

void Mesh::init_comms() {
  for (MeshAxis a : kMeshAxes) comm(a);
}

Communicator& Mesh::replica_comm() {
  if (shape_.ep == 1) return comm(MeshAxis::kDP);
  if (!replica_comm_) {
    if (!options_) {
      throw ConfigError(
          "mesh: no communicator options were given, so the dp_ep communicator cannot be created");
    }
    replica_comm_ = create_subgroup(
        *options_, group_ranks_over({MeshAxis::kDP, MeshAxis::kEP}, rank_), "dp_ep");
  }
  return *replica_comm_;
}

}  // namespace brigade
