#include "brigade/parallel/pipeline/tied_embedding.h"

#include <algorithm>

#include "brigade/base/check.h"

namespace brigade {

namespace {

// This rank's chunks holding wte, the first stage's copy first.
std::vector<GptStage*> wte_holders(std::span<GptStage* const> chunks) {
  std::vector<GptStage*> out;
  for (GptStage* c : chunks) {
    BRIGADE_CHECK(c != nullptr) << "null GPT stage";
    if (c->wte_offset() >= 0) out.push_back(c);
  }
  std::stable_partition(out.begin(), out.end(), [](GptStage* c) { return c->is_first(); });
  for (GptStage* c : out)
    BRIGADE_CHECK(c->wte_numel() == out.front()->wte_numel())
        << "wte copies of " << c->wte_numel() << " and " << out.front()->wte_numel() << " floats";
  return out;
}

}  // namespace

std::vector<int> embedding_group_ranks(const Mesh& mesh, int rank) {
  MeshCoords coords = mesh.coords_of(rank);
  const int pp = mesh.extent(MeshAxis::kPP);
  const int axis = static_cast<int>(MeshAxis::kPP);
  coords[axis] = 0;
  std::vector<int> out{mesh.rank_of(coords)};
  if (pp > 1) {
    coords[axis] = pp - 1;
    out.push_back(mesh.rank_of(coords));
  }
  return out;
}

std::unique_ptr<Communicator> create_embedding_group(const CommOptions& world, const Mesh& mesh) {
  const std::vector<int> ranks = embedding_group_ranks(mesh, mesh.rank());
  if (ranks.size() < 2 || std::find(ranks.begin(), ranks.end(), mesh.rank()) == ranks.end())
    return nullptr;
  return create_subgroup(world, ranks, "embedding");
}

void sum_tied_embedding_grads(Communicator* group, std::span<GptStage* const> chunks) {
  const std::vector<GptStage*> holders = wte_holders(chunks);
  if (holders.empty()) return;
  const int64_t n = holders.front()->wte_numel();
  float* sum = holders.front()->grads() + holders.front()->wte_offset();
  for (size_t i = 1; i < holders.size(); ++i) {
    const float* g = holders[i]->grads() + holders[i]->wte_offset();
    for (int64_t k = 0; k < n; ++k) sum[k] += g[k];
  }
  if (group != nullptr) group->all_reduce(sum, n, ReduceOp::kSum);
  for (size_t i = 1; i < holders.size(); ++i)
    std::copy(sum, sum + n, holders[i]->grads() + holders[i]->wte_offset());
}

void sync_tied_embedding_params(Communicator* group, std::span<GptStage* const> chunks) {
  const std::vector<GptStage*> holders = wte_holders(chunks);
  if (holders.empty()) return;
  const int64_t n = holders.front()->wte_numel();
  float* w = holders.front()->params() + holders.front()->wte_offset();
  if (group != nullptr) group->broadcast(w, n, 0);
  for (size_t i = 1; i < holders.size(); ++i)
    std::copy(w, w + n, holders[i]->params() + holders[i]->wte_offset());
}

}  // namespace brigade
