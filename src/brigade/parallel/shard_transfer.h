#pragma once
// Moving whole shards between ranks, for ZeRO-3's start (rank 0's initial parameters) and the
// global gradient norm. These run outside the step's hot path, point to point with rank 0.
#include "brigade/comm/communicator.h"
#include "brigade/parallel/zero_shard.h"

namespace brigade {

// Collective. Rank 0's full (flat layout, at least shards.total() elements) is cut into shards:
// rank r receives full[owned(r)] into mine (owned(r).size() floats). full is read on rank 0 only.
void scatter_from_root(Communicator& dp, const ShardLayout& shards, const float* full, float* mine);

// Collective. The sum of value over ranks, added in rank order in double, so every rank gets the
// same bits (for the squared gradient norm of sharded gradients).
double sum_over_ranks(Communicator& dp, double value);

}  // namespace brigade
