#pragma once
// The tied embedding across pipeline stages (Megatron's "embedding group"). GPT-2 uses wte both
// as the token embedding (first stage) and as the unembedding (last stage), so with pp > 1 two
// ranks hold a copy. Both start equal (initialisation is per tensor name), each backward adds
// only its own use's gradient, and the true gradient is their sum: after backward, before the
// optimizer, sum_tied_embedding_grads() gives both copies that sum, so the same deterministic
// optimizer step keeps the copies bitwise identical. Under tensor parallelism each tp rank holds
// a vocab shard of wte, and the group pairs the first and last pipeline stages of the same tp
// (and dp, ep) coordinate. Data parallelism is independent of it: both are sums, in any order.
#include <memory>
#include <span>
#include <vector>

#include "brigade/comm/comm_factory.h"
#include "brigade/comm/communicator.h"
#include "brigade/comm/mesh.h"
#include "brigade/model/gpt_stage.h"

namespace brigade {

// World ranks of `rank`'s embedding group: {pp coordinate 0, pp coordinate pp - 1}, the other
// coordinates those of `rank`; one rank when pp == 1.
std::vector<int> embedding_group_ranks(const Mesh& mesh, int rank);

// This rank's embedding-group communicator (collective over the group's two members), or null
// when the rank is on neither end of the pipeline or pp == 1 (the stages holding wte then share
// the process and are summed locally). Every rank may call it; only members connect.
std::unique_ptr<Communicator> create_embedding_group(const CommOptions& world, const Mesh& mesh);

// Sums the wte gradients of the chunks holding wte (this rank's and, over group, the other end's)
// into every copy. group: from create_embedding_group, or null when this rank's chunks hold
// every copy (pp = 1). A no-op on ranks whose chunks hold no wte. Collective over group.
void sum_tied_embedding_grads(Communicator* group, std::span<GptStage* const> chunks);

// Copies the first stage's wte into the last stage's (after loading a checkpoint, or to repair
// drift): a broadcast from the group's first member. Collective over group.
void sync_tied_embedding_params(Communicator* group, std::span<GptStage* const> chunks);

}  // namespace brigade
